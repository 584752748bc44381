"""Probed quantities: one ``Capacity`` filter per dimension the worker's probe samples
(cpu, memory, disk), each a ``worker >= request`` threshold on the worker's last sample
(the spec's threshold model), by the dimension's name in ``worker.available``.

Under ``allocation = "reserve"`` availability is also reduced by what running
executions were allotted: ``min(last sample, capacity - sum of running allotments)``,
the Kubernetes scheduler's "allocatable minus requests", tempered by the live sample.

``PROBED`` is the list of them. Adding a probed dimension is a line there and its
probe in ``flux/worker/probe.py`` (docs/architecture-scheduling.md): the request asks
for it in ``resources={...}``, the wire, the database and the view carry it as data,
and the custom filter leaves a dimension that has a filter of its own alone.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from flux.domain import resources as dimensions
from flux.domain.allotment import Allotment
from flux.domain.resource_request import ResourceRequest, format_bytes
from flux.domain.resources import Quantity, Resources
from flux.domain.samples import available_field
from flux.scheduling.filters.base import Check, Consumption, Filter, Reason, after_reservations
from flux.scheduling.snapshot import WorkerView

#: How a filter shows (available, requested) in its reason.
Show = Callable[[Quantity, Quantity], tuple[str, str]]


def _cores(available: float, requested: float) -> tuple[str, str]:
    return str(available), f"{requested:g}"


def _bytes(available: int, requested: int) -> tuple[str, str]:
    """The request as people write it everywhere ("8Gi": ``format_bytes``, as ``describe``),
    what is available in its unit to a tenth ("4.0Gi"); exact bytes where that rounding hides the gap."""
    want = format_bytes(int(requested)) if float(requested).is_integer() else str(requested)
    unit = want.lstrip("0123456789")
    if unit and want[0].isdigit():
        factor = int(requested) // int(want[: -len(unit)])
        have = f"{available / factor:.1f}{unit}"
        if have != f"{requested / factor:.1f}{unit}":
            return have, want
    return str(available), str(requested)


def _amounts(available: Quantity, requested: Quantity) -> tuple[str, str]:
    return f"{available:g}", f"{requested:g}"


class Capacity(Filter):
    """One probed quantity, by its dimension's name: what the request asks of it against
    ``worker.available`` (reported by the field that shows it: "memory_available 4.0Gi
    < requested 8.0Gi", "disk_free ...") and, for reserve and feasibility, ``worker.total``."""

    consumed = Consumption.UNDER_RESERVE

    def __init__(self, dimension: str, show: Show | None = None):
        self.name = self.dimension = dimension
        self.phrase = f"Insufficient {dimension}"
        #: The field its reasons name: the one ``GET /workers`` shows its availability by.
        self.field = available_field(dimension)
        self.show = show or (_bytes if dimension in dimensions.BYTES else _amounts)

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        return request is not None and self.name in request.quantities

    def bind(self, request: ResourceRequest, affinity: Mapping[str, Any] | None) -> Check:
        name, wanted, short = self.name, request.quantities[self.name], self._short

        def check(worker: WorkerView) -> Reason | None:
            available = worker.available.get(name, 0)
            return None if available >= wanted else short(worker, available, wanted)

        return check

    def _short(self, worker: WorkerView, available: Quantity, wanted: Quantity) -> Reason:
        have, want = self.show(available, wanted)
        return self.reason(f"{self.field} {have}{after_reservations(worker)} < requested {want}")

    def allot(self, request: ResourceRequest, worker: WorkerView) -> Allotment:
        return Allotment(Resources({self.name: request.quantities[self.name]}))

    def take(self, worker: WorkerView, allotment: Allotment) -> None:
        if worker.reserves and (taken := allotment.resources.get(self.name)):
            worker.available = worker.available.updated({self.name: worker.available.get(self.name, 0) - taken})

    def apply(self, worker: WorkerView, allotments: list[Allotment]) -> None:
        if worker.reserves and self.name in worker.total:
            left = worker.total[self.name] - sum(a.resources.get(self.name, 0) for a in allotments)
            if left < worker.available.get(self.name, 0):
                worker.available = worker.available.updated({self.name: left})

    def idle(self, worker: WorkerView) -> None:
        total = worker.total.get(self.name)
        if total is not None and worker.available.get(self.name) != total:
            worker.available = worker.available.updated({self.name: total})


CPU = Capacity(dimensions.CPU, _cores)
MEMORY = Capacity(dimensions.MEMORY)
DISK = Capacity(dimensions.DISK)
#: One filter per probed quantity, in checking order (after affinity, before the GPUs).
PROBED: tuple[Capacity, ...] = (CPU, MEMORY, DISK)
