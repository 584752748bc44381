"""One dispatch round's placement, as the server runs it (pure, no I/O; docs/contention.md).

A round places the queue in its order (``flux.scheduling.ordering``) a page at a
time, while workers have free slots, and stops once it has made ``BUDGET``
placements: the rest are the next round's, which the dispatcher starts at once. A
budget of work per round is what production schedulers keep (Slurm's main loop stops
at a depth and a time limit, the Kubernetes scheduler places one pod a cycle, Kueue
admits in batches): a round holds the placement lock and one transaction, and ten
thousand placements in one round kept the first of them from their workers for most
of a second. Nothing starves and the order stays the queue's: every round starts again
from the head of the queue, so what one round left for lack of budget comes first in
the next (its priority and fair-share turn unchanged, fair share recomputed from what
the earlier round placed), and what fits nowhere never counts against the budget, so it
cannot stop work behind it from being placed (no head-of-line blocking).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.fairshare import FairShare
from flux.scheduling.ordering import order
from flux.scheduling.placement import Placement, place
from flux.scheduling.pool import FreePool

#: Placements one round makes at most (B17: a round of 500 costs ~30 ms of CPU on 1,000 workers).
BUDGET = 500


@dataclass
class Outcome:
    placements: list[Placement] = field(default_factory=list)
    #: The executions the round looked at (placed, or found waiting): the others it never reached.
    examined: set[str] = field(default_factory=set)
    #: The budget ran out: work may still be placeable now (the next round starts at once).
    spent: bool = False


def run(
    pages: Iterable[list[Demand]],
    pool: FreePool,
    contention: Contention | None = None,
    fair: FairShare | None = None,
    budget: int = BUDGET,
) -> Outcome:
    """Place ``pages`` (read lazily: a page is asked for only when the round goes on to it)."""
    outcome = Outcome()
    for page in pages:
        left = budget - len(outcome.placements)
        outcome.placements += place(_noting(order(page, fair), outcome.examined), pool, contention, limit=left)
        if len(outcome.placements) >= budget:
            outcome.spent = True
            break
        if pool.best() is None:
            break
    return outcome


def _noting(demands: Iterator[Demand], examined: set[str]) -> Iterator[Demand]:
    for demand in demands:
        examined.add(demand.execution_id)
        yield demand
