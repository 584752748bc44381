"""One round's contention: quotas and concurrency limits before placement, and room
for what fits nowhere (pure, no I/O; docs/contention.md).

Placement (``flux.scheduling.placement``) asks it three things: may this execution
be placed at all now (``refusal``: its namespace's quota, a concurrency key at its
limit), it was placed (``placed``: the ledgers count it), and it fits nowhere
(``make_room``). An execution that fits nowhere while lower-priority work holds or
waits for workers is given room on one worker: by preemption when its class may
preempt and preemptible lower-priority executions hold enough there, else by
waiting for what runs there to end. Either way that worker's room is held for it
for the rest of the round - later (lower or equal priority) executions in the
queue order see it as taken - and every round holds it again until it is placed,
so backfilling lower-priority work around it can never starve it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

from flux.domain.allotment import Allotment
from flux.domain.workers import WorkerState
from flux.scheduling.allocation import Allotter, take
from flux.scheduling.concurrency import KeyLedger
from flux.scheduling.demand import Demand
from flux.scheduling.filters import Check, Filter, Reason
from flux.scheduling.holders import Holder
from flux.scheduling.pool import FreePool
from flux.scheduling.preemption import Room, best_room, find_room
from flux.scheduling.quotas import QuotaLedger

#: Executions given room per round at most: each costs a walk of the workers that hold work.
MAX_ROOMS = 64


@dataclass(frozen=True)
class Preemption:
    preemptor: str
    worker: str
    victims: tuple[str, ...]


@dataclass
class Contention:
    holders: Iterable[Holder] = ()
    quotas: QuotaLedger | None = None
    #: The lowest priority that holds or waits: work at it has nobody below to hold back.
    floor: int = 0
    #: Preemptions decided this round (the server notifies the victims).
    preemptions: list[Preemption] = field(default_factory=list)
    #: Why each execution that was not placed waits, beyond the filters' verdicts.
    waiting: dict[str, Reason] = field(default_factory=dict)
    #: Workers whose views the round changed for a room it held (to be rebuilt).
    touched: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        holders = list(self.holders)
        self.keys = KeyLedger(holders)
        self.by_worker: dict[str, list[Holder]] = {}
        for holder in holders:
            self.by_worker.setdefault(holder.worker, []).append(holder)
        self._added: dict[str, list[Allotment]] = {}
        self._rooms_left = MAX_ROOMS
        self._no_room: set[tuple] = set()

    def refusal(self, demand: Demand) -> Reason | None:
        """Why ``demand`` may not be placed now whatever the workers have, or None."""
        reason = self.quotas.refusal(demand) if self.quotas else None
        return reason or (self.keys.refusal(demand) if demand.keys else None)

    def placed(self, demand: Demand, worker: str, allotment: Allotment) -> None:
        if self.quotas:
            self.quotas.take(demand, demand.request.quantities if demand.request is not None else allotment.quantities)
        if demand.keys:
            self.keys.take(demand)
        self._added.setdefault(worker, []).append(allotment)

    def make_room(self, demand: Demand, checks: tuple[Check, ...], filters: tuple[Filter, ...], pool: FreePool) -> None:
        """Hold room for ``demand``, which fits nowhere now, on the best worker (preempting there if it may)."""
        memo = (demand.constraint_key, demand.namespace, demand.priority, demand.may_preempt)
        if demand.priority <= self.floor or self._rooms_left <= 0 or memo in self._no_room:
            return
        self._rooms_left -= 1
        room = self._room(demand, checks, pool, preempt=True) if demand.may_preempt else None
        preempting = room is not None and bool(room.victims)
        room = room or self._room(demand, checks, pool, preempt=False)
        if room is None:
            self._no_room.add(memo)
            return
        worker = room.worker
        allotment = Allotter(filters, demand.affinity)(demand.request, worker)
        take(filters, worker, allotment)
        worker.running += 1
        pool.put(worker)
        self.touched.add(worker.name)
        self._added.setdefault(worker.name, []).append(allotment)
        if preempting:
            self._leave(worker.name, {v.execution_id for v in room.victims})
            self.preemptions.append(Preemption(demand.execution_id, worker.name, tuple(v.execution_id for v in room.victims)))
        self.waiting[demand.execution_id] = _why(room, preempting)

    @staticmethod
    def _evictable(demand: Demand, holder: Holder) -> bool:
        return holder.preemptible and holder.priority < demand.priority

    def _room(self, demand: Demand, checks: tuple[Check, ...], pool: FreePool, preempt: bool) -> Room | None:
        evictable = (lambda h: self._evictable(demand, h)) if preempt else (lambda h: True)
        rooms = []
        for name in self.by_worker.keys() | self._added.keys():
            worker = pool.views.get(name)
            if worker is not None and worker.state == WorkerState.ONLINE:
                rooms.append(find_room(checks, worker, self.by_worker.get(name, ()), self._added.get(name, ()), evictable))
        return best_room(rooms)

    def _leave(self, worker: str, victims: set[str]) -> None:
        self.by_worker[worker] = [replace(h, leaving=True) if h.execution_id in victims else h for h in self.by_worker[worker]]


def _why(room: Room, preempting: bool) -> Reason:
    if preempting:
        names = ", ".join(v.execution_id for v in room.victims)
        return Reason("preemption", "preempting", f"room is being made on worker {room.worker.name}: preempting {names}")
    waited = [*room.leaving, *room.victims]
    if not waited:
        return Reason("preemption", "waiting for room", f"room is held for it on worker {room.worker.name}")
    names = ", ".join(h.execution_id for h in waited)
    return Reason("preemption", "waiting for room",
                  f"room is held for it on worker {room.worker.name} until {names} end (lower-priority work may not take it)")
