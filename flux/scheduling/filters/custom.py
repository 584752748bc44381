"""Countable custom resources: what a worker advertises (``--resource fpga=2``) and a
request asks for (``resources={"fpga": 1}``).

They have no live sample, so they are always counted: total minus what running
executions hold, in either allocation mode, and re-checked after every placement in
a round. This filter keeps the ledger of the whole ``resources`` map (allotment,
take, apply) for every name; a countable dimension with a filter of its own (its own
words, its own place in the pipeline) only adds a check and leaves the booking here.
"""

from __future__ import annotations

from typing import Any, Mapping

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters.base import Consumption, Filter, Reason, after_reservations
from flux.scheduling.snapshot import WorkerView


def _minus(available: dict[str, float], taken: dict[str, float]) -> dict[str, float]:
    """A new dict: views share their dicts with the cached views they were copied from."""
    return {name: amount - taken.get(name, 0.0) for name, amount in available.items()}


class CustomResources(Filter):
    name = "custom"
    consumed = Consumption.ALWAYS

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        return request is not None and bool(request.resources)

    def check(self, request: ResourceRequest, affinity: Mapping[str, Any] | None, worker: WorkerView) -> Reason | None:
        for name, amount in request.resources:
            have = worker.custom_available.get(name, 0.0)
            if have < amount:
                message = f"resource {name} {have:g}{after_reservations(worker)} < requested {amount:g}"
                return self.reason(message, phrase=f"Insufficient {name}")
        return None

    def allot(self, request: ResourceRequest, worker: WorkerView, allotment: dict) -> None:
        allotment["resources"] = request.custom

    def take(self, worker: WorkerView, allotment: dict) -> None:
        worker.custom_available = _minus(worker.custom_available, allotment.get("resources", {}))

    def apply(self, worker: WorkerView, allotments: list[dict]) -> None:
        worker.custom_available = dict(worker.custom_total)
        for allotment in allotments:
            self.take(worker, allotment)

    def idle(self, worker: WorkerView) -> dict[str, Any]:
        return {"custom_available": dict(worker.custom_total)}


CUSTOM = CustomResources()
