"""Queue order: who is placed first (pure, no I/O).

Highest priority first; within one priority, namespaces by fair share
(``flux.scheduling.fairshare``); within a namespace, first come first served. A
queue of one priority and one namespace - every queue before contention features
are used - keeps exactly its submission order.
"""

from __future__ import annotations

from itertools import groupby
from typing import Iterable, Iterator

from flux.scheduling.demand import Demand
from flux.scheduling.fairshare import FairShare, interleave


def order(demands: Iterable[Demand], fair: FairShare | None = None) -> Iterator[Demand]:
    """``demands`` in placement order (a stable sort: equal ones keep their order)."""
    ranked = sorted(demands, key=lambda d: -d.priority)
    for _, level in groupby(ranked, key=lambda d: d.priority):
        same = list(level)
        yield from (same if fair is None else interleave(same, fair))
