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
from typing import Iterable, Iterator, Mapping

from flux.domain.gang import Gang
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.fairshare import FairShare
from flux.scheduling.gang_round import GangRound
from flux.scheduling.gangs import GangDemand, GangPlacement
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
    #: The gangs placed, all or nothing (``flux.scheduling.gang_round``), and its record of those that wait.
    gangs: list[GangPlacement] = field(default_factory=list)
    gang_round: GangRound | None = None

    @property
    def placed(self) -> int:
        """Placements made, a gang's members each one (what the budget counts)."""
        return len(self.placements) + sum(len(g.members) for g in self.gangs)


def run(
    pages: Iterable[list[Demand]],
    pool: FreePool,
    contention: Contention | None = None,
    fair: FairShare | None = None,
    budget: int = BUDGET,
    gangs: Mapping[str, Gang] | None = None,
) -> Outcome:
    """Place ``pages`` (read lazily: a page is asked for only when the round goes on to it).
    ``gangs``: the shape of each gang among them, by id; a gang is placed at its turn in
    queue order, whole or not at all, between runs of single executions."""
    outcome = Outcome()
    gangs = {} if gangs is None else gangs  # the caller's dict, filled as its pages are read
    for page in pages:
        ordered = _noting(order(page, fair), outcome.examined)
        if not gangs.keys() & {d.execution_id for d in page}:  # read lazily, up to the budget
            outcome.placements += place(ordered, pool, contention, limit=budget - outcome.placed)
            if outcome.placed >= budget:
                outcome.spent = True
                break
            if pool.best() is None:
                break
            continue
        for run_ in _runs(ordered, gangs):
            if isinstance(run_, GangDemand):
                outcome.gang_round = outcome.gang_round or GangRound(pool, contention)
                placed = outcome.gang_round.place(run_)
                if placed is not None:
                    outcome.gangs.append(placed)
            else:
                singles = place(iter(run_), pool, contention, limit=budget - outcome.placed)
                outcome.placements += singles
                if outcome.gang_round is not None and singles:  # its boards count those workers again
                    outcome.gang_round.later(p.worker_name for p in singles)
            if outcome.placed >= budget:
                outcome.spent = True
                return outcome
        if pool.best() is None:
            break
    return outcome


def _runs(demands: Iterator[Demand], gangs: Mapping[str, Gang]) -> Iterator[list[Demand] | GangDemand]:
    """The demands in order, as runs of single executions and, between them, each gang."""
    singles: list[Demand] = []
    for demand in demands:
        gang = gangs.get(demand.execution_id)
        if gang is None:
            singles.append(demand)
            continue
        if singles:
            yield singles
            singles = []
        yield GangDemand(demand, gang)
    if singles:
        yield singles


def _noting(demands: Iterator[Demand], examined: set[str]) -> Iterator[Demand]:
    for demand in demands:
        examined.add(demand.execution_id)
        yield demand
