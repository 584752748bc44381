"""``Holder``: an execution that holds a worker (CLAIMED, RUNNING, CANCELLING), as
quotas, concurrency limits, fair share and preemption see it (pure, no I/O).

``Holdings`` sums what each namespace's holders hold in one pass a round: the quota ledger
and fair share both start from it, instead of each walking every holder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable

from flux.domain.allotment import EMPTY, Allotment
from flux.domain.namespaces import DEFAULT
from flux.domain.resources import Resources

#: The fair-share dimension of a worker's slots (not a resource name a user can give).
SLOTS = "<slots>"


@dataclass(frozen=True)
class Holder:
    execution_id: str
    worker: str
    namespace: str = DEFAULT
    priority: int = 0
    preemptible: bool = True
    allotment: Allotment = EMPTY
    #: When its attempt was claimed (its start, for the work a preemption loses and ``min_runtime``).
    claimed_at: float = 0.0
    #: Its concurrency keys (their limits are the waiting executions' business).
    keys: tuple[str, ...] = ()
    #: A preemption's grace period runs (or it is being cancelled): it is already on its way out.
    leaving: bool = False
    #: While its preemption's grace period runs: for whom (a withdrawn preemption lets it stay).
    preempted_by: str | None = None
    #: Its last recorded checkpoint (its last completed task); before any, its claim.
    progress_at: float = 0.0
    #: Seconds of its attempt in which it is chosen only when nothing else makes room (``min_runtime``).
    min_runtime: float = 0.0
    #: When an attempt of it last ended preempted (None: never): the cooldown protects it.
    preempted_at: float | None = None
    #: The gang it is a member of (None: a single execution): a victim only with its whole gang.
    gang: str | None = None

    @cached_property
    def quantities(self) -> Resources:
        """What it holds (for quotas and fair share; the server keeps holders across rounds)."""
        return self.allotment.quantities


@dataclass
class Holdings:
    #: By namespace: the quantities its holders hold, their slots (``SLOTS``) included.
    quantities: dict[str, dict[str, float]] = field(default_factory=dict)
    #: How many hold a worker at each priority (the lowest is the floor of who may be held back).
    priorities: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, holders: Iterable[Holder]) -> "Holdings":
        held = cls()
        held.update(holders)
        return held

    @property
    def lowest(self) -> int | None:
        """The lowest priority that holds a worker (None: nothing holds)."""
        return min(self.priorities, default=None)

    def update(self, added: Iterable[Holder], removed: Iterable[Holder] = ()) -> None:
        """Holders that came (claims) and went (ends): the server keeps one ``Holdings`` across
        rounds and tells it what changed, instead of summing every holder each round."""
        for sign, holders in ((1, added), (-1, removed)):
            for holder in holders:
                sums = self.quantities.get(holder.namespace)
                if sums is None:
                    sums = self.quantities[holder.namespace] = {SLOTS: 0}
                sums[SLOTS] += sign
                for name, amount in holder.quantities.items():
                    sums[name] = sums.get(name, 0) + sign * amount
                count = self.priorities[holder.priority] = self.priorities.get(holder.priority, 0) + sign
                if not count:
                    del self.priorities[holder.priority]
                if not sums[SLOTS]:
                    del self.quantities[holder.namespace]
