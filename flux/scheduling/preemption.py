"""Preemption: which running executions leave so that a more important one fits, and
when a preemption is called off (pure, no I/O).

As the Kubernetes scheduler does: for each worker, remove every execution that may
be evicted (lower priority, preemptible, not already leaving), check that the
waiting execution would then fit (slots, reserved cpu and memory, GPUs, custom
resources: every filter that applies to it, on the worker as if only what stays
ran there), and give back each one it still fits without, the costliest to lose
first (``Costs.keep_order``). What is left are the victims. A set of victims costs
(``Costs.key``), in this order: the gang members it holds (a member's end ends its
whole gang's attempt: chosen only when nothing else makes room; docs/gangs.md), the
executions preempted within the cooldown it holds (likewise), those within their
``min_runtime``, its most important priority, the sum of its priorities, the work
it loses (seconds since each victim's last checkpoint: its last completed task, or
its start), and its size. Among workers the cheapest set wins.

Executions already leaving count as gone, so a waiting execution never takes more
victims for the same room; those leaving because of a preemption are given back
last, and those the room still needs are the room's ``leaving``: a preemption no
room needs any more is withdrawn (``withdrawals``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Sequence

from flux.domain.allotment import Allotment
from flux.domain.policy import DEFAULT_COOLDOWN
from flux.domain.priority import MIN_PRIORITY
from flux.scheduling.filters import PIPELINE, Check, Filter, first_bound_failure
from flux.scheduling.holders import Holder
from flux.scheduling.ranking import candidate_key
from flux.scheduling.snapshot import WorkerView


@dataclass(frozen=True)
class Costs:
    """What preempting an execution costs, as of ``now`` (epoch seconds)."""

    now: float = 0.0
    cooldown: float = DEFAULT_COOLDOWN

    def lost(self, holder: Holder) -> float:
        """The work it loses: seconds since its last checkpoint (its last completed task, or its start)."""
        return max(0.0, self.now - max(holder.progress_at, holder.claimed_at))

    def cooling(self, holder: Holder) -> bool:
        """Preempted within the cooldown: chosen again only when nothing else makes room."""
        return holder.preempted_at is not None and self.now - holder.preempted_at < self.cooldown

    def young(self, holder: Holder) -> bool:
        """Within its attempt's ``min_runtime``: chosen only while nothing else would do."""
        return holder.min_runtime > 0 and self.now - holder.claimed_at < holder.min_runtime

    def keep_order(self, holder: Holder) -> tuple:
        """Sort key of the order candidates are given back in: the costliest to lose first
        (``cooling``, ``young``, priority, then the oldest checkpoint: the most work lost).
        Inlined: a search for room sorts every candidate of every worker it examines."""
        now = self.now
        return (
            holder.gang is None,  # a gang member's end ends its whole gang's attempt
            holder.preempted_at is None or now - holder.preempted_at >= self.cooldown,
            holder.min_runtime <= 0 or now - holder.claimed_at >= holder.min_runtime,
            -holder.priority,
            max(holder.progress_at, holder.claimed_at),
            holder.claimed_at,
            holder.execution_id,
        )

    def key(self, victims: Collection[Holder]) -> tuple:
        """What a set of victims costs (lower is better; see the module's docstring)."""
        if not victims:
            return (0, 0, 0, MIN_PRIORITY - 1, 0, 0.0, 0, 0.0)
        return (
            sum(v.gang is not None for v in victims),
            sum(self.cooling(v) for v in victims),
            sum(self.young(v) for v in victims),
            max(v.priority for v in victims),
            sum(v.priority - MIN_PRIORITY for v in victims),
            round(sum(self.lost(v) for v in victims), 3),
            len(victims),
            -max(v.claimed_at for v in victims),
        )


def victims_of(candidates: Iterable[Holder], keep: Callable[[Holder], bool], costs: Costs) -> tuple[Holder, ...]:
    """The candidates that must leave: each is offered to ``keep`` (which keeps it when
    the waiting execution still fits with it staying, and says so), the costliest to
    lose first; those it cannot keep are the victims. Over any kind of room (one worker,
    or several for a gang), ``keep`` holds what it kept."""
    return tuple(holder for holder in sorted(candidates, key=costs.keep_order) if not keep(holder))


def withdrawals(
    holders: Iterable[Holder], needed: Collection[str], sought: Collection[str], waiting: Collection[str]
) -> list[Holder]:
    """The victims whose preemption is called off: no room held this round needs them
    (``needed``), and their preemptor no longer waits (``waiting``: still queued) or the
    round looked for its room (``sought``) and held it elsewhere, or found none.
    A preemptor the round did not reach (its budget) keeps its victims."""
    return [
        h
        for h in holders
        if h.preempted_by is not None
        and h.execution_id not in needed
        and (h.preempted_by in sought or h.preempted_by not in waiting)
    ]


@dataclass(frozen=True)
class Room:
    """Where a waiting execution goes once room is made."""

    worker: WorkerView
    #: What must leave for it (new victims when it preempts; what it waits on when it does not).
    victims: tuple[Holder, ...]
    #: What is already leaving there that it waits for (being cancelled, or a preemption it needs).
    leaving: tuple[Holder, ...] = ()
    #: What its victims cost (``Costs.key``).
    cost: tuple = ()

    def key(self) -> tuple:
        return (*self.cost, candidate_key(self.worker))


def room_view(
    worker: WorkerView, staying: Sequence[Allotment], filters: Sequence[Filter] = PIPELINE.filters
) -> WorkerView:
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
    filters: Sequence[Filter] = PIPELINE.filters,
    costs: Costs = Costs(),
) -> Room | None:
    """The victims on ``worker`` that make room (see the module's docstring), or None.
    ``added``: what this round already placed or held there (never evicted); ``filters``:
    those that constrain the waiting execution."""
    gone, withdrawable, candidates, fixed = [], [], [], list(added)
    for holder in holders:
        if holder.leaving:
            (withdrawable if holder.preempted_by is not None else gone).append(holder)
        elif evictable(holder):
            candidates.append(holder)
        else:
            fixed.append(holder.allotment)
    room = room_view(worker, fixed, filters)
    if not fits(checks, room):
        return None

    def keep(holder: Holder) -> bool:
        nonlocal room
        kept = room.evolve(running=room.running + 1)  # as if it stayed: counted like a placement
        for f in filters:
            f.take(kept, holder.allotment)
        if not fits(checks, kept):
            return False
        room = kept
        return True

    victims = victims_of(candidates, keep, costs)
    needed = victims_of(withdrawable, keep, costs)  # already leaving: given back last
    return Room(worker, victims, (*gone, *needed), costs.key(victims))
