"""Sampled capacity: cpu, memory and disk, each a ``worker >= request`` threshold on
the worker's last sample (the spec's threshold model).

Under ``allocation = "reserve"`` availability is also reduced by what running
executions were allotted: ``min(last sample, capacity - sum of running allotments)``,
the Kubernetes scheduler's "allocatable minus requests", tempered by the live sample.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters.base import Consumption, Filter, Reason, after_reservations
from flux.scheduling.snapshot import WorkerView

_BINARY_UNITS = (("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024))


def _cores(available: float, requested: float) -> tuple[str, str]:
    return str(available), f"{requested:g}"


def _bytes(available: int, requested: int) -> tuple[str, str]:
    """Both sides in the requested amount's unit ("4.0Gi", "8.0Gi"); exact bytes if rounding hides the gap."""
    for unit, factor in _BINARY_UNITS:
        if requested >= factor:
            shown = f"{available / factor:.1f}{unit}", f"{requested / factor:.1f}{unit}"
            if shown[0] != shown[1]:
                return shown
            break
    return str(available), str(requested)


class Capacity(Filter):
    """One sampled quantity: the request field ``name`` against the view's ``available``
    (reported as such: "memory_available 4.0Gi < requested 8.0Gi") and ``total``."""

    consumed = Consumption.UNDER_RESERVE

    def __init__(self, name: str, available: str, total: str, show: Callable[[Any, Any], tuple[str, str]]):
        self.name, self.available, self.total, self.show = name, available, total, show
        self.phrase = f"Insufficient {name}"

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        return request is not None and getattr(request, self.name) is not None

    def check(self, request: ResourceRequest, affinity: Mapping[str, Any] | None, worker: WorkerView) -> Reason | None:
        wanted, available = getattr(request, self.name), getattr(worker, self.available)
        if available >= wanted:
            return None
        have, want = self.show(available, wanted)
        return self.reason(f"{self.available} {have}{after_reservations(worker)} < requested {want}")

    def allot(self, request: ResourceRequest, worker: WorkerView, allotment: dict) -> None:
        allotment[self.name] = getattr(request, self.name)

    def take(self, worker: WorkerView, allotment: dict) -> None:
        if worker.reserves:
            setattr(worker, self.available, getattr(worker, self.available) - allotment.get(self.name, 0))

    def apply(self, worker: WorkerView, allotments: list[dict]) -> None:
        if worker.reserves:
            left = getattr(worker, self.total) - sum(a.get(self.name, 0) for a in allotments)
            setattr(worker, self.available, min(getattr(worker, self.available), left))

    def idle(self, worker: WorkerView) -> dict[str, Any]:
        return {self.available: getattr(worker, self.total)}


CPU = Capacity("cpu", "cpu_available", "cpu_total", _cores)
MEMORY = Capacity("memory", "memory_available", "memory_total", _bytes)
DISK = Capacity("disk", "disk_free", "disk_total", _bytes)
