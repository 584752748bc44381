"""Countable custom resources: what a worker advertises (``--resource fpga=2``) and a
request asks for (``resources={"fpga": 1}``).

They share one namespace with the probed quantities: a worker view's ``total`` and
``available`` hold both. They have no live sample, so they are always counted: total
minus what running executions hold, in either allocation mode, and re-checked after
every placement in a round. This filter checks and books (allots, takes, applies)
every name of the ``resources`` map that no filter owns as its ``dimension`` (a
probed quantity's ``Capacity`` does); a countable dimension with a filter of its own
that owns nothing (its own words, its own place in the pipeline) only adds a check
and leaves the booking here.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from flux.domain.allotment import EMPTY, Allotment
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import WELL_KNOWN, Quantity, Resources
from flux.scheduling.filters.base import Check, Consumption, Filter, Reason, after_reservations
from flux.scheduling.snapshot import WorkerView


class CustomResources(Filter):
    name = "custom"
    consumed = Consumption.ALWAYS

    def __init__(self, owned: frozenset[str] = frozenset()) -> None:
        #: The dimensions other filters of its pipeline own (``Pipeline`` builds it told them).
        self.owned = owned

    def _asked(self, request: ResourceRequest) -> Iterator[tuple[str, float]]:
        return ((name, amount) for name, amount in request.resources if name not in self.owned)

    def _counted(self, quantities: Mapping[str, Quantity]) -> list[str]:
        """The names of ``quantities`` this filter counts."""
        return [name for name in quantities if name not in WELL_KNOWN and name not in self.owned]

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        return request is not None and any(True for _ in self._asked(request))

    def bind(self, request: ResourceRequest, affinity: Mapping[str, Any] | None) -> Check:
        asked = list(self._asked(request))

        def check(worker: WorkerView) -> Reason | None:
            available = worker.available
            for name, amount in asked:
                have = available.get(name, 0)
                if have < amount:
                    message = f"resource {name} {have:g}{after_reservations(worker)} < requested {amount:g}"
                    return self.reason(message, phrase=f"Insufficient {name}")
            return None

        return check

    def allot(self, request: ResourceRequest, worker: WorkerView) -> Allotment:
        asked = dict(self._asked(request))
        return Allotment(Resources(asked)) if asked else EMPTY

    def take(self, worker: WorkerView, allotment: Allotment) -> None:
        available, owned = worker.available, self.owned
        taken = {
            name: available[name] - amount
            for name, amount in allotment.resources.items()
            if name in available and name not in WELL_KNOWN and name not in owned
        }
        if taken:
            worker.available = available.updated(taken)

    def apply(self, worker: WorkerView, allotments: list[Allotment]) -> None:
        total = worker.total
        left = {name: total[name] - sum(a.resources.get(name, 0) for a in allotments) for name in self._counted(total)}
        if left:
            worker.available = worker.available.updated(left)

    def idle(self, worker: WorkerView) -> None:
        worker.available = worker.available.updated({name: worker.total[name] for name in self._counted(worker.total)})
