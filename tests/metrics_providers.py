"""Metrics providers loaded by worker processes in tests (``--metrics-provider metrics_providers:deep``)."""


def deep() -> dict[str, float]:
    return {"queue_depth": 50.0}


def shallow() -> dict[str, float]:
    return {"queue_depth": 1.0}
