"""Preemption: which running executions leave so that a more important one fits (pure, no I/O).

As the Kubernetes scheduler does: for each worker, remove every execution that may
be evicted (lower priority, preemptible, not already leaving), check that the
waiting execution would then fit (slots, reserved cpu and memory, GPUs, custom
resources: every filter that applies to it, on the worker as if only what stays
ran there), and give back - most important and oldest first - each one it still
fits without. What is left are the victims: the fewest, least important, youngest
attempts. Among workers, the one whose most important victim is least important
wins, then the smallest sum of victims' priorities, then the fewest victims, then
the youngest. Executions already leaving (a grace period running) count as gone,
so a waiting execution never takes more victims for the same room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from flux.domain.allotment import Allotment
from flux.domain.priority import MIN_PRIORITY
from flux.scheduling.filters import PIPELINE, Check, Filter, first_bound_failure
from flux.scheduling.holders import Holder
from flux.scheduling.ranking import candidate_key
from flux.scheduling.snapshot import WorkerView


@dataclass(frozen=True)
class Room:
    """Where a waiting execution goes once room is made."""

    worker: WorkerView
    #: What must leave for it (new victims when it preempts; what it waits on when it does not).
    victims: tuple[Holder, ...]
    #: What is already leaving there (a grace period runs).
    leaving: tuple[Holder, ...] = ()

    def key(self) -> tuple:
        if not self.victims:
            return (MIN_PRIORITY - 1, 0, 0, 0.0, candidate_key(self.worker))
        return (
            max(v.priority for v in self.victims),
            sum(v.priority - MIN_PRIORITY for v in self.victims),
            len(self.victims),
            -max(v.claimed_at for v in self.victims),
            candidate_key(self.worker),
        )


def room_view(worker: WorkerView, staying: Sequence[Allotment], filters: Sequence[Filter] = PIPELINE) -> WorkerView:
    """``worker`` as if only ``staying`` ran there: ``filters``' dimensions idle, then their
    allotments applied (the filters that constrain the waiting execution are enough: its
    checks read nothing else)."""
    view = worker.evolve(running=len(staying))
    kept = [a for a in staying if a]
    for f in filters:
        f.idle(view)
        f.apply(view, kept)
    return view


def fits(checks: Iterable[Check], view: WorkerView) -> bool:
    return view.free_slots > 0 and first_bound_failure(checks, view) is None


def find_room(
    checks: tuple[Check, ...],
    worker: WorkerView,
    holders: Iterable[Holder],
    added: Sequence[Allotment],
    evictable: Callable[[Holder], bool],
    filters: Sequence[Filter] = PIPELINE,
) -> Room | None:
    """The victims on ``worker`` that make room (see the module's docstring), or None.
    ``added``: what this round already placed or held there (never evicted); ``filters``:
    those that constrain the waiting execution."""
    leaving, candidates, fixed = [], [], list(added)
    for holder in holders:
        if holder.leaving:
            leaving.append(holder)
        elif evictable(holder):
            candidates.append(holder)
        else:
            fixed.append(holder.allotment)
    room = room_view(worker, fixed, filters)
    if not fits(checks, room):
        return None
    victims = []
    for holder in sorted(candidates, key=lambda h: (-h.priority, h.claimed_at)):
        kept = room.evolve(running=room.running + 1)  # as if it stayed: counted like a placement
        for f in filters:
            f.take(kept, holder.allotment)
        if fits(checks, kept):
            room = kept
        else:
            victims.append(holder)
    return Room(worker, tuple(victims), tuple(leaving))
