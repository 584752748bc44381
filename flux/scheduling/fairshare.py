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


def demand_quantities(demand: Demand) -> dict[str, float]:
    asked = dict(demand.request.quantities) if demand.request is not None else {}
    asked[SLOTS] = 1
    return asked


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
    heap = [(fair.share(namespace), queue[0].scheduled_at, namespace, 0) for namespace, queue in queues.items()]
    heapq.heapify(heap)
    while heap:
        _, _, namespace, index = heapq.heappop(heap)
        demand = queues[namespace][index]
        yield demand
        held = shares[namespace]
        for name, amount in demand_quantities(demand).items():
            held[name] = held.get(name, 0) + amount
        if index + 1 < len(queues[namespace]):
            share = dominant_share(held, fair.capacity, fair.weights.get(namespace, 1.0))
            heapq.heappush(heap, (share, queues[namespace][index + 1].scheduled_at, namespace, index + 1))
