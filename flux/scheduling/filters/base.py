"""The filter protocol: one resource dimension, one filter.

Like a Kubernetes scheduler Filter plugin, a filter answers one question about one
dimension - may this worker take this execution? - and when the answer is no it
says why with a typed ``Reason``. It also owns its dimension's bookkeeping, over the
typed ``Allotment`` (``flux.domain.allotment``): what a placement sets aside
(``allot``), how that is counted against the worker's view within a round
(``take``), how the allotments of running executions are applied to a fresh view
(``apply``), and what the view looks like idle (``idle``, for feasibility). The
defaults here allot and count nothing, for dimensions such as labels and packages
that placements never use up.
"""

from __future__ import annotations

from enum import Enum
from functools import partial
from typing import Any, Callable, Mapping, NamedTuple

from flux.domain.allotment import EMPTY, Allotment
from flux.domain.resource_request import ResourceRequest
from flux.scheduling.snapshot import WorkerView


class Reason(NamedTuple):
    """Why a worker cannot take an execution (now, or ever when judged idle). A tuple, not
    a frozen dataclass: placement makes one per worker that fails a scan, and a tuple is
    made several times faster."""

    #: What said no: a filter's name, or a gate before the filters ("draining", "stale", "slots").
    filter: str
    #: What the summary counts: "Insufficient cpu", "didn't match affinity".
    phrase: str
    #: The human line, with the numbers: "cpu_available 2.0 < requested 4".
    message: str


#: A filter bound to one set of constraints (``Filter.bind``): the worker's ``Reason``, or ``None``.
Check = Callable[[WorkerView], "Reason | None"]


class Consumption(Enum):
    """Whether placements within one round can use a dimension up, so a worker that
    was eligible when the round began must be checked again before it is chosen."""

    #: Placements never change it (labels, packages).
    NEVER = "never"
    #: Sampled quantities: used up only on a reserving worker (``allocation = "reserve"``).
    UNDER_RESERVE = "under reserve"
    #: Counted, never sampled (custom resources): used up in either mode.
    ALWAYS = "always"


class Filter:
    """One dimension of eligibility; subclasses set ``name`` and ``phrase`` and define
    ``applies`` and one of ``check`` and ``bind`` (each is written in terms of the other)."""

    name: str
    phrase: str
    consumed = Consumption.NEVER
    #: The quantity dimension whose check and booking this filter owns (``"cpu"``,
    #: a probed ``"scratch"``); the custom filter leaves it alone. ``None``: none.
    dimension: str | None = None
    #: Whether what ``allot`` sets aside depends on the worker (GPU indexes do; a
    #: quantity is what the request asks, wherever it goes).
    allots_per_worker = False
    #: Whether the verdict reads only what a worker registered (labels, packages), so
    #: placement keeps it across rounds (``flux.scheduling.registered``).
    static = False

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        """Whether the execution constrains this dimension at all (if not, ``check`` is never called)."""
        raise NotImplementedError

    def check(
        self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None, worker: WorkerView
    ) -> Reason | None:
        """Why ``worker`` fails this dimension, or ``None`` when it passes (only called if ``applies``)."""
        return self.bind(request, affinity)(worker)

    def bind(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> Check:
        """``check`` for one set of constraints, as a function of the worker: placement scans
        the fleet with it, so a filter reads what it needs of the request once."""
        return partial(self.check, request, affinity)

    def allot(self, request: ResourceRequest, worker: WorkerView) -> Allotment:
        """What a placement on ``worker`` sets aside for this dimension."""
        return EMPTY

    def bind_allot(
        self, request: ResourceRequest, affinity: Mapping[str, Any] | None
    ) -> Callable[[WorkerView], Allotment]:
        """``allot`` for one set of constraints, as a function of the worker (what placement
        calls): a filter whose choice depends on the affinity too (MIG profiles) overrides it."""
        return partial(self.allot, request)

    def take(self, worker: WorkerView, allotment: Allotment) -> None:
        """Count a new allotment against the worker's view (within one placement round)."""

    def apply(self, worker: WorkerView, allotments: list[Allotment]) -> None:
        """Apply the allotments of the executions the worker runs to a fresh view of it."""

    def idle(self, worker: WorkerView) -> None:
        """Set this dimension of ``worker`` (a copy) as if nothing ran on the worker."""

    def reason(self, message: str, phrase: str | None = None) -> Reason:
        return Reason(self.name, phrase or self.phrase, message)

    def __repr__(self) -> str:
        return f"<filter {self.name}>"


def after_reservations(worker: WorkerView) -> str:
    """Said after an availability that running allotments reduced."""
    return " after reservations" if worker.reserves else ""
