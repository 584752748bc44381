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

import heapq
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from flux.domain.allotment import Allotment
from flux.domain.workers import WorkerState
from flux.scheduling.allocation import Allotter, take
from flux.scheduling.concurrency import KeyLedger
from flux.scheduling.demand import Demand
from flux.scheduling.filters import Check, Filter, Reason, bound
from flux.scheduling.holders import Holder
from flux.scheduling.pool import FreePool
from flux.scheduling.preemption import Costs, Room, find_room, fits, room_view
from flux.scheduling.quotas import QuotaLedger

#: Executions given room per round at most (the Kubernetes scheduler preempts for one pod a cycle).
MAX_ROOMS = 32
#: Workers the round's searches for room examine at most, all searches together: the
#: round's budget of preemption work (a cycle of the Kubernetes scheduler examines 100
#: for its one pod). What it leaves, the next rounds search, highest priority first.
ROOM_BUDGET = 300
#: Workers a search for room examines at most (the Kubernetes scheduler's
#: ``minCandidateNodesAbsolute``): taken from a place that moves each round and with
#: each set of constraints, so a large fleet is covered over a few rounds.
MAX_CANDIDATES = 100


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
    #: Where this round's searches start in the fleet (the dispatcher counts its rounds).
    offset: int = 0
    #: ``holders`` by worker, when the caller has them so (the server's snapshot groups
    #: them as it reads them): a round that looks for room does not group them again.
    grouped: Mapping[str, list[Holder]] | None = None
    #: What preempting costs this round (its clock and the cooldown).
    costs: Costs = field(default_factory=Costs)
    #: Executions already leaving that a room held this round waits for (their preemption stands).
    needed: set[str] = field(default_factory=set)
    #: Executions whose room the round looked for to the end (``preemption.withdrawals``).
    sought: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.holders = list(self.holders)
        #: Built when first asked: a round without concurrency keys, or that looks for no
        #: room, never walks the holders for them.
        self._keys: KeyLedger | None = None
        self._by_worker: dict[str, list[Holder]] | None = None
        self._added: dict[str, list[Allotment]] = {}
        self._rooms_left = MAX_ROOMS
        self._examinations_left = ROOM_BUDGET
        #: The workers holding work, sorted (where searches for room start), once per round.
        self._holding: list[str] | None = None
        self._no_room: set[tuple] = set()
        #: Rooms found per set of constraints, priority and mode, best first, each with
        #: the version of its worker it was found at: a worker changed since is looked at again.
        self._rooms: dict[tuple, list] = {}
        self._version: dict[str, int] = {}
        #: The rooms held this round, in queue order: (worker, execution, priority).
        self._held: list[tuple[str, str, int]] = []
        #: ``_held_room``'s answers by kind of demand and rooms held so far.
        self._kept_from: dict[tuple, Reason | None] = {}

    @property
    def keys(self) -> KeyLedger:
        if self._keys is None:
            self._keys = KeyLedger(self.holders)
        return self._keys

    @property
    def by_worker(self) -> dict[str, list[Holder]]:
        """The holders by worker (what a search for room examines)."""
        if self._by_worker is None and self.grouped is not None:
            self._by_worker = dict(self.grouped)  # this round's own: ``_leave`` replaces a worker's list
        elif self._by_worker is None:
            self._by_worker = {}
            for holder in self.holders:
                self._by_worker.setdefault(holder.worker, []).append(holder)
        return self._by_worker

    def refusal(self, demand: Demand) -> Reason | None:
        """Why ``demand`` may not be placed now whatever the workers have, or None."""
        reason = self.quotas.refusal(demand) if self.quotas else None
        return reason or (self.keys.refusal(demand) if demand.keys else None)

    def placed(self, demand: Demand, worker: str, allotment: Allotment) -> None:
        if self.quotas:
            self.quotas.take(demand, demand.request.quantities if demand.request is not None else allotment.quantities)
        if demand.keys:
            self.keys.take(demand)
        self._add(worker, allotment)

    def _add(self, worker: str, allotment: Allotment) -> None:
        self._added.setdefault(worker, []).append(allotment)
        self._version[worker] = self._version.get(worker, 0) + 1

    def make_room(self, demand: Demand, checks: tuple[Check, ...], filters: tuple[Filter, ...], pool: FreePool) -> None:
        """Hold room for ``demand``, which fits nowhere now, on the best worker (preempting there
        if it may); a room held for work ahead of it, that it could use, is why it waits
        until then (``_held_room``: what its explanation leads with). ``checks``: the
        namespace gate and the filters that change; the static ones are judged apart, once
        per worker and kind of demand (``FreePool.registered``)."""
        kept_from = self._held_room(demand, checks, filters, pool)
        if kept_from is not None:
            self.waiting[demand.execution_id] = kept_from
        if demand.priority <= self.floor or self._rooms_left <= 0 or self._examinations_left <= 0:
            return
        # demands of one kind find the same rooms; namespaces matter only to restricted workers
        kind = (demand.constraint_key, demand.namespace if pool.restricted else None, demand.priority)
        memo = (*kind, demand.may_preempt)
        if memo in self._no_room:
            self.sought.add(demand.execution_id)
            return
        self._rooms_left -= 1
        room = self._room(demand, kind, checks, filters, pool, preempt=True) if demand.may_preempt else None
        preempting = room is not None and bool(room.victims)
        room = room or self._room(demand, kind, checks, filters, pool, preempt=False)
        if self._examinations_left > 0:  # a search cut short by the budget proves nothing
            self.sought.add(demand.execution_id)
        if room is None:
            self._no_room.add(memo)
            return
        if demand.may_preempt:  # a room that only waits keeps no one's preemption going
            self.needed.update(h.execution_id for h in room.leaving if self._evictable(demand, h))
        worker = room.worker
        allotment = Allotter(filters, demand.affinity)(demand.request, worker)
        take(filters, worker, allotment)
        worker.running += 1
        pool.put(worker)
        self.touched.add(worker.name)
        self._add(worker.name, allotment)
        if preempting:
            self._leave(worker.name, {v.execution_id for v in room.victims})
            self.preemptions.append(
                Preemption(demand.execution_id, worker.name, tuple(v.execution_id for v in room.victims))
            )
        self.waiting[demand.execution_id] = _why(room, preempting)
        self._held.append((worker.name, demand.execution_id, demand.priority))

    def _held_room(
        self, demand: Demand, checks: tuple[Check, ...], filters: tuple[Filter, ...], pool: FreePool
    ) -> Reason | None:
        """The first room held this round (for a higher priority, or one ahead of it in the
        queue) on a worker that could take ``demand`` were it idle: what keeps it off that
        worker beyond what runs there (a lower priority may not take held room). Memoised
        per kind of demand, its priority (the line says it) and rooms held so far: a long
        queue behind one room asks once."""
        if not self._held:
            return None
        memo = (demand.constraint_key, demand.namespace if pool.restricted else None, demand.priority, len(self._held))
        if memo not in self._kept_from:
            static = bound((f for f in filters if f.static), demand.request, demand.affinity)
            passes = pool.registered.judge(("room", demand.constraint_key), static)
            self._kept_from[memo] = next(
                (
                    _kept_from(name, execution, priority, demand.priority)
                    for name, execution, priority in self._held
                    if (worker := pool.views.get(name)) is not None
                    and passes(worker)
                    and fits(checks, room_view(worker, (), filters))
                ),
                None,
            )
        return self._kept_from[memo]

    @staticmethod
    def _evictable(demand: Demand, holder: Holder) -> bool:
        return holder.preemptible and holder.priority < demand.priority

    def _room(
        self,
        demand: Demand,
        kind: tuple,
        checks: tuple[Check, ...],
        filters: tuple[Filter, ...],
        pool: FreePool,
        preempt: bool,
    ) -> Room | None:
        """The best room for ``demand`` (``preempt``: by evicting lower-priority work, else
        by waiting for what runs to end), from the rooms found for its kind this round."""
        kind = (*kind, preempt)
        evictable = (lambda h: self._evictable(demand, h)) if preempt else (lambda h: True)
        static = bound((f for f in filters if f.static), demand.request, demand.affinity)
        passes = pool.registered.judge(("room", demand.constraint_key), static)  # verdicts the pool keeps

        def search(name: str) -> tuple | None:
            if self._examinations_left <= 0:
                return None
            self._examinations_left -= 1
            worker = pool.views.get(name)
            if worker is None or worker.state != WorkerState.ONLINE:
                return None
            if not passes(worker):
                return None  # labels and packages: no leaving can change them
            held = self.by_worker.get(name, ())
            room = find_room(checks, worker, held, self._added.get(name, ()), evictable, filters, self.costs)
            return None if room is None else (room.key(), self._version.get(name, 0), name, room)

        rooms = self._rooms.get(kind)
        if rooms is None:
            rooms = self._rooms[kind] = [r for r in map(search, self._candidates(kind)) if r is not None]
            heapq.heapify(rooms)
        while rooms:
            _, version, name, room = rooms[0]
            if version == self._version.get(name, 0):
                return room
            found = search(name)  # the worker changed since: look again
            if found is None:
                heapq.heappop(rooms)
            else:
                heapq.heapreplace(rooms, found)
        return None

    def _candidates(self, kind: tuple) -> list[str]:
        """The workers a search examines: those that hold work, ``MAX_CANDIDATES`` at most."""
        if self._holding is None:
            self._holding = sorted(self.by_worker)
        names = self._holding
        if not self._added.keys() <= self.by_worker.keys():
            names = sorted(self.by_worker.keys() | self._added.keys())
        if len(names) <= MAX_CANDIDATES:
            return names
        start = (hash(kind) + self.offset * MAX_CANDIDATES) % len(names)
        return (names[start:] + names[:start])[:MAX_CANDIDATES]

    def _leave(self, worker: str, victims: set[str]) -> None:
        self.by_worker[worker] = [
            replace(h, leaving=True) if h.execution_id in victims else h for h in self.by_worker[worker]
        ]
        self._version[worker] = self._version.get(worker, 0) + 1


def _kept_from(worker: str, execution: str, priority: int, own: int) -> Reason:
    """A room held for another, said as ``binding``'s priority room (``ROOM``'s filter)."""
    if priority > own:
        whose = (
            f"higher-priority {execution} (priority {priority}; this one's {own}): lower-priority work may not take it"
        )
    else:
        whose = f"{execution}, ahead of it at priority {priority}: work behind it may not take it"
    return Reason("preemption", "room held for another", f"room on worker {worker} is held for {whose}")


def _why(room: Room, preempting: bool) -> Reason:
    if preempting:
        names = ", ".join(v.execution_id for v in room.victims)
        return Reason(
            "preemption", "preempting", f"room is being made on worker {room.worker.name}: preempting {names}"
        )
    waited = [*room.leaving, *room.victims]
    if not waited:
        return Reason("preemption", "waiting for room", f"room is held for it on worker {room.worker.name}")
    names = ", ".join(h.execution_id for h in waited)
    return Reason(
        "preemption",
        "waiting for room",
        f"room is held for it on worker {room.worker.name} until {names} end (lower-priority work may not take it)",
    )
