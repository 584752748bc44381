"""Fair share between namespaces: dominant resource fairness (pure, no I/O).

Within one priority, the namespace with the smallest weighted dominant share goes
next (DRF, Ghodsi et al., NSDI 2011): a namespace's dominant share is the largest
fraction it holds of any dimension of the fleet (cpu, memory, GPUs, custom
resources, slots), divided by its weight (``flux namespace set NS --weight 2``).
Within a namespace work is first come, first served. Shares start from what each
namespace holds and grow with each execution the round places, so a round
interleaves namespaces rather than serving one until it runs out.
"""

from __future__ import annotations

import heapq
from typing import Iterable, Iterator, Mapping

from flux.domain.resources import Resources
from flux.scheduling.demand import Demand
from flux.scheduling.holders import SLOTS, Holdings, Holder


def dominant_share(held: Mapping[str, float], capacity: Mapping[str, float], weight: float = 1.0) -> float:
    """The largest fraction of any dimension of ``capacity`` that ``held`` takes, over ``weight``."""
    fractions = [held.get(name, 0) / total for name, total in capacity.items() if total > 0]
    return max(fractions, default=0.0) / (weight if weight > 0 else 1.0)


def _grown(held: dict[str, float], demand: Demand, capacity: Mapping[str, float], dominant: float) -> float:
    """Grow ``held`` by ``demand`` and return its unweighted dominant share, from the one
    before (``dominant``): what is held only grows, so only the dimensions it asks can
    raise it, and the other dimensions are not walked again."""
    asked = demand.request.quantities.items() if demand.request is not None else ()
    for name, amount in ((SLOTS, 1), *asked):
        held[name] = total_held = held.get(name, 0) + amount
        total = capacity.get(name, 0)
        if total > 0 and total_held / total > dominant:
            dominant = total_held / total
    return dominant


class FairShare:
    def __init__(self, capacity: Mapping[str, float], weights: Mapping[str, float], holders: Iterable[Holder] | Holdings = ()):
        self.capacity = dict(capacity)
        self.weights = weights
        held = holders if isinstance(holders, Holdings) else Holdings.of(holders)
        #: What each namespace holds, by dimension (copies: ``add`` grows them).
        self.held: dict[str, dict[str, float]] = {namespace: dict(sums) for namespace, sums in held.quantities.items()}

    def share(self, namespace: str) -> float:
        return dominant_share(self.held.get(namespace, {}), self.capacity, self.weights.get(namespace, 1.0))


def capacity_of(totals: Iterable[Resources], slots: int) -> dict[str, float]:
    """The fleet's capacity by dimension (what DRF divides by), its slots included."""
    capacity: dict[str, float] = {SLOTS: float(slots)}
    for total in totals:
        for name, amount in total.items():
            capacity[name] = capacity.get(name, 0) + amount
    return capacity


def interleave(demands: list[Demand], fair: FairShare) -> Iterator[Demand]:
    """One priority's demands, namespace by namespace in order of their shares (each
    namespace's own in FIFO order), as if each were placed when its turn came."""
    queues: dict[str, list[Demand]] = {}
    for demand in demands:
        queues.setdefault(demand.namespace, []).append(demand)
    if len(queues) == 1:
        yield from demands
        return
    shares = {namespace: dict(fair.held.get(namespace, {})) for namespace in queues}
    dominant = {namespace: dominant_share(held, fair.capacity) for namespace, held in shares.items()}
    weight = {namespace: w if (w := fair.weights.get(namespace, 1.0)) > 0 else 1.0 for namespace in queues}
    heap = [(dominant[namespace] / weight[namespace], queue[0].scheduled_at, namespace, 0) for namespace, queue in queues.items()]
    heapq.heapify(heap)
    while heap:
        _, _, namespace, index = heapq.heappop(heap)
        demand = queues[namespace][index]
        yield demand
        dominant[namespace] = share = _grown(shares[namespace], demand, fair.capacity, dominant[namespace])
        if index + 1 < len(queues[namespace]):
            heapq.heappush(heap, (share / weight[namespace], queues[namespace][index + 1].scheduled_at, namespace, index + 1))
