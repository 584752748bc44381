"""Fair share between namespaces: dominant resource fairness (pure, no I/O).

Within one priority, the namespace with the smallest weighted dominant share goes
next (DRF, Ghodsi et al., NSDI 2011): a namespace's dominant share is the largest
fraction it holds of any dimension of the fleet (cpu, memory, GPUs, custom
resources, slots), divided by its weight (``flux namespace set NS --weight 2``).
Within a namespace work is first come, first served. Shares start from what each
namespace holds and grow with each execution the round places, so a round
interleaves namespaces rather than serving one until it runs out. With a
half-life (``--fair-share-half-life``) each namespace also carries its decayed
past usage (``flux.scheduling.usage``), added to what it holds now: a namespace
that held the fleet all night yields to one that had nothing.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from flux.domain.resources import Resources
from flux.scheduling.demand import Demand
from flux.scheduling.holders import SLOTS, Holder, Holdings


def dominant_share(held: Mapping[str, float], capacity: Mapping[str, float], weight: float = 1.0) -> float:
    """The largest fraction of any dimension of ``capacity`` that ``held`` takes, over ``weight``."""
    fractions = [held.get(name, 0) / total for name, total in capacity.items() if total > 0]
    return max(fractions, default=0.0) / (weight if weight > 0 else 1.0)


class FairShare:
    def __init__(
        self,
        capacity: Mapping[str, float],
        weights: Mapping[str, float],
        holders: Iterable[Holder] | Holdings = (),
        past: Mapping[str, float] | None = None,
    ):
        self.capacity = dict(capacity)
        self.weights = weights
        #: Each namespace's decayed dominant usage, as a share of the fleet (``usage.past_shares``).
        self.past = past or {}
        held = holders if isinstance(holders, Holdings) else Holdings.of(holders)
        #: What each namespace holds, by dimension (copies: ``add`` grows them).
        self.held: dict[str, dict[str, float]] = {namespace: dict(sums) for namespace, sums in held.quantities.items()}

    def share(self, namespace: str) -> float:
        """Its weighted dominant share: what it holds now plus its decayed past, over its weight."""
        weight = self.weights.get(namespace, 1.0)
        now = dominant_share(self.held.get(namespace, {}), self.capacity, weight)
        return now + self.past.get(namespace, 0.0) / (weight if weight > 0 else 1.0)


def capacity_of(totals: Iterable[Resources], slots: int) -> dict[str, float]:
    """The fleet's capacity by dimension (what DRF divides by), its slots included."""
    capacity: dict[str, float] = {SLOTS: float(slots)}
    for total in totals:
        for name, amount in total.items():
            capacity[name] = capacity.get(name, 0) + amount
    return capacity


def interleave(demands: list[Demand], fair: FairShare) -> Iterator[Demand]:
    """One priority's demands, namespace by namespace in order of their shares (each
    namespace's own in FIFO order), as if each were placed when its turn came.

    Each demand's turn is keyed by its namespace's weighted share with every earlier
    demand of that namespace placed (shares only grow, so each namespace's keys rise in
    its FIFO order) and then by when it was submitted: one sort of those keys is the
    merge of the namespaces' queues that taking the smallest share each turn makes."""
    queues: dict[str, list[Demand]] = {}
    for demand in demands:
        queues.setdefault(demand.namespace, []).append(demand)
    if len(queues) == 1:
        yield from demands
        return
    asked: dict[int, tuple] = {}  # what a request adds, by dimension of the fleet (requests are shared objects)
    turns: list[tuple] = []
    for namespace, queue in queues.items():
        turns += _turns(namespace, queue, fair, asked)
    turns.sort()
    for turn in turns:
        yield turn[-1]


def _turns(namespace: str, queue: list[Demand], fair: FairShare, asked: dict[int, tuple]) -> list[tuple]:
    """``(share before it, submitted, namespace, position, demand)`` for each of a namespace's demands."""
    capacity = fair.capacity
    taken = {
        name: amount / capacity[name]
        for name, amount in fair.held.get(namespace, {}).items()
        if capacity.get(name, 0) > 0
    }
    dominant = max(taken.values(), default=0.0)  # the fractions of the fleet it holds, by dimension
    weight = w if (w := fair.weights.get(namespace, 1.0)) > 0 else 1.0
    past = fair.past.get(namespace, 0.0)
    turns = []
    for position, demand in enumerate(queue):
        turns.append(((past + dominant) / weight, demand.scheduled_at, namespace, position, demand))
        steps = asked.get(id(demand.request))
        if steps is None:
            steps = asked[id(demand.request)] = _steps(demand, capacity)
        for name, fraction in steps:
            taken[name] = now = taken.get(name, 0.0) + fraction
            if now > dominant:
                dominant = now
    return turns


def _steps(demand: Demand, capacity: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """The fraction of each dimension of the fleet that placing ``demand`` takes."""
    quantities = demand.request.quantities.items() if demand.request is not None else ()
    return tuple(
        (name, amount / capacity[name]) for name, amount in ((SLOTS, 1), *quantities) if capacity.get(name, 0) > 0
    )
