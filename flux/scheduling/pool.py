"""``FreePool``: the fleet as placement keeps it between rounds (pure, no I/O).

A dispatch round must cost what it places and what changed, not the size of the
fleet. The pool holds the current view of every worker, by name, and a lazy heap
of the ONLINE workers with a free slot, least loaded on top (``candidate_key``).
It is kept across rounds and told of each view that is new or was changed in
place (``put``: a registration, a sample that moved, a placement, a completion,
a drain, a worker gone stale or back) and of each worker that is gone (``drop``),
so the least-loaded free worker is found in O(log n) without walking the fleet.

Each ``put`` stamps the worker; a heap entry whose stamp is not the worker's
latest is out of date and is discarded when it surfaces, and the heap is rebuilt
when such entries outnumber the live ones. Keys are unique per worker (the name
is in ``candidate_key``), so the heap picks exactly what ``ranking.best`` would.
"""

from __future__ import annotations

import heapq

from flux.domain.workers import WorkerState
from flux.scheduling.fairshare import capacity_of
from flux.scheduling.filters import PIPELINE, Pipeline
from flux.scheduling.ranking import candidate_key
from flux.scheduling.registered import Registered, same_registration
from flux.scheduling.snapshot import WorkerView


def _same_capacity(old: WorkerView, new: WorkerView) -> bool:
    """Whether ``new`` adds to the fleet's capacity exactly what ``old`` did."""
    return (
        old.state == new.state
        and old.max_concurrent_executions == new.max_concurrent_executions
        and (old.total is new.total or old.total == new.total)
    )


class FreePool:
    def __init__(self, views: list[WorkerView] = (), pipeline: Pipeline = PIPELINE):
        #: The filters placement checks these workers with (the verdicts ``registered`` keeps are theirs).
        self.pipeline = pipeline
        #: Each worker's current view, by name.
        self.views: dict[str, WorkerView] = {}
        #: How many of them are ONLINE (the unconstrained eligible count).
        self.online_count = 0
        #: How many are restricted to some namespaces: while none is, namespaces cost placement nothing.
        self.restricted = 0
        #: Who passes each set of static filters, kept while no registration changes.
        self.registered = Registered()
        #: Bumped when an ONLINE worker's total or slots may have changed (``capacity``).
        self._totals_version = 0
        self._capacity: tuple[int, dict[str, float]] | None = None
        self._stamps: dict[str, int] = {}
        self._stamp = 0
        self._heap: list[tuple[tuple, int, WorkerView]] = []
        for view in views:
            self.put(view)

    def put(self, view: WorkerView) -> None:
        """``view`` is the worker's view now (new, or changed in place)."""
        old = self.views.get(view.name)
        self.online_count += (view.state == WorkerState.ONLINE) - (old is not None and old.state == WorkerState.ONLINE)
        self.restricted += (view.namespaces is not None) - (old is not None and old.namespaces is not None)
        if old is None or not same_registration(old, view):
            self.registered.changed()
        if old is None or (old is not view and not _same_capacity(old, view)):
            self._totals_version += 1
        self.views[view.name] = view
        self._stamp += 1
        self._stamps[view.name] = self._stamp
        if view.free_slots > 0:
            heapq.heappush(self._heap, (candidate_key(view), self._stamp, view))
            if len(self._heap) > 2 * len(self.views) + 64:
                self._compact()

    def drop(self, name: str) -> None:
        """The worker is gone (evicted, released, renamed)."""
        old = self.views.pop(name, None)
        if old is not None:
            self.online_count -= old.state == WorkerState.ONLINE
            self.restricted -= old.namespaces is not None
            del self._stamps[name]
            self.registered.changed()
            self._totals_version += 1

    def online(self) -> list[WorkerView]:
        """Every ONLINE worker (a walk of the fleet: constrained and routed work only)."""
        return [view for view in self.views.values() if view.state == WorkerState.ONLINE]

    def capacity(self) -> dict[str, float]:
        """The ONLINE workers' totals and slots by dimension (what fair share divides
        by), summed again only when one of them may have changed."""
        if self._capacity is None or self._capacity[0] != self._totals_version:
            online = self.online()
            self._capacity = (
                self._totals_version,
                capacity_of((w.total for w in online), sum(w.max_concurrent_executions for w in online)),
            )
        return self._capacity[1]

    def best(self) -> WorkerView | None:
        """The least-loaded ONLINE worker with a free slot, or None."""
        heap = self._heap
        while heap:
            key, stamp, view = heap[0]
            if self._stamps.get(view.name) != stamp or view.free_slots == 0:
                heapq.heappop(heap)  # replaced since, or full (a put brings it back)
            elif key != candidate_key(view):
                heapq.heapreplace(heap, (candidate_key(view), stamp, view))
            else:
                return view
        return None

    def _compact(self) -> None:
        self._heap = [
            (candidate_key(view), self._stamps[name], view) for name, view in self.views.items() if view.free_slots > 0
        ]
        heapq.heapify(self._heap)
