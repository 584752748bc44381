"""Which namespaces a worker serves: the one rule placement and explain share (pure).

A worker serves every namespace unless it was started with ``--namespace`` (a
dedicated pool, like a tainted node pool). The check is a gate before the filters,
as draining is: it is about the worker, not about what the execution requests, so it
costs nothing unless some worker is restricted (``FreePool.restricted``).
"""

from __future__ import annotations

from flux.scheduling.filters.base import Check, Reason
from flux.scheduling.snapshot import WorkerView

#: ``Reason.filter`` and the phrase the summary counts.
NAME = "namespace"
PHRASE = "serves other namespaces"


def serves(worker: WorkerView, namespace: str) -> bool:
    return worker.namespaces is None or namespace in worker.namespaces


def refusal(worker: WorkerView, namespace: str) -> Reason | None:
    """Why ``worker`` never takes work of ``namespace``, or None when it may."""
    if serves(worker, namespace):
        return None
    return Reason(NAME, PHRASE, f"serves namespaces {', '.join(sorted(worker.namespaces or ()))} only")


def gate(namespace: str) -> Check:
    """``refusal`` for one namespace as a function of the worker: what placement scans with."""
    return lambda worker: refusal(worker, namespace)
