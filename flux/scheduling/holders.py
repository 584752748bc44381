"""``Holder``: an execution that holds a worker (CLAIMED, RUNNING, CANCELLING), as
quotas, concurrency limits, fair share and preemption see it (pure, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

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
    #: When its attempt was claimed: the youngest attempts are preempted first.
    claimed_at: float = 0.0
    #: Its concurrency keys (their limits are the waiting executions' business).
    keys: tuple[str, ...] = ()
    #: A preemption's grace period runs: it is already on its way out.
    leaving: bool = False

    @property
    def quantities(self) -> Resources:
        """What it holds, its slot included (for quotas and fair share)."""
        return self.allotment.quantities
