"""The gangs of one dispatch round: admitted, placed all or nothing, or given room that
later work may not take (pure, no I/O; docs/gangs.md).

A round meets its gangs in queue order, between its single executions. For each gang:
admission first (``gang_admission``: quotas and keys count ``size`` x its request), then
placement (``gangs``) on a ``Board`` kept per kind of gang for the whole round and told
of every worker the round changes, so two hundred gangs of one kind cost one scan of
the fleet and then only the workers they took.

A gang that fits nowhere is not starved by a stream of smaller work: like a single
execution given room (``flux.scheduling.contention``), it holds what fits of it now in
the domain it waits in (the closest that could ever hold it), and what comes after it
in queue order (lower priority, or its own priority submitted later) sees that room as
taken. Every round holds it again, from the head of the queue, until all of it fits:
a hold is never a claim, so two gangs that each hold half of what both need cannot
deadlock (the one ahead in the queue holds first each round, and the other holds only
what is left). When it may preempt, the victims are chosen across the domain's workers
(``gang_victims``). At most ``MAX_HOLDS`` gangs hold room a round.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

from flux.domain.workers import WorkerState
from flux.scheduling import gang_admission
from flux.scheduling.contention import Contention, Preemption
from flux.scheduling.explain import capacity_view
from flux.scheduling.filters.base import Reason
from flux.scheduling.gang_explain import GangShortfall, shortfall
from flux.scheduling.gang_victims import GangRoom, gang_room
from flux.scheduling.gangs import Board, Fit, GangDemand, GangPlacement, claim, seat_members
from flux.scheduling.pool import FreePool
from flux.scheduling.snapshot import WorkerView

#: Gangs that hold room in one round at most (Slurm's backfill reserves for a few jobs at the head too).
MAX_HOLDS = 8


@dataclass
class GangRound:
    pool: FreePool
    contention: Contention | None = None
    placements: list[GangPlacement] = field(default_factory=list)
    #: Why each gang that was not placed waits: its admission's refusal, or its shortfall.
    waiting: dict[str, Reason | GangShortfall] = field(default_factory=dict)
    #: The room held this round for each gang that waits for it (its members that fit now).
    held: dict[str, GangPlacement] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._boards: dict[tuple, Board] = {}
        self._idle: dict[tuple, Board] = {}
        self._holds_left = MAX_HOLDS
        #: Workers the round's single placements changed since the last gang (``later``).
        self._later: set[str] = set()

    def later(self, names: Iterable[str]) -> None:
        """Single placements changed these workers (the pool has them): the boards count
        them again only when a gang next looks, so singles after the last gang cost nothing."""
        self._later.update(names)

    def _key(self, gd: GangDemand) -> tuple:
        return (gd.kind, gd.demand.namespace if self.pool.restricted else None)

    def board(self, gd: GangDemand) -> Board:
        """The kind's board, built from the fleet the first time the round meets the kind."""
        key = self._key(gd)
        board = self._boards.get(key)
        if board is None:
            fit = Fit(gd.demand, gd.gang, key[1], self.pool.pipeline)
            board = self._boards[key] = Board(fit, gd.gang, self.pool.online())
        return board

    def changed(self, views: list[WorkerView], booked: Board | None = None) -> None:
        """The round changed these workers (a placement, a hold): every board counts them
        again, but ``booked``, whose own members they took (``Board.took``)."""
        for view in views:
            self.pool.put(view)
            for board in self._boards.values():
                if board is not booked:
                    board.update(view)
            if self.contention is not None:
                self.contention.touched.add(view.name)

    def place(self, gd: GangDemand) -> GangPlacement | None:
        """Admit and place ``gd``, or hold room for it; the placement, or None when it waits."""
        if self._later:
            views = self.pool.views
            self.changed([views[name] for name in sorted(self._later) if name in views])
            self._later.clear()
        refused = gang_admission.refusal(gd, self.contention)
        if refused is not None:
            self.waiting[gd.execution_id] = refused
            return None
        board = self.board(gd)
        found = board.best(gd.gang.size)
        if found is None:
            self._wait(gd, board)
            return None
        placement = seat_members(gd.execution_id, gd.gang, *found)
        self.changed(claim(placement, self.pool.views, board.fit.filters), booked=board)
        board.took(placement)
        gang_admission.placed(gd, placement, self.contention)
        self.placements.append(placement)
        return placement

    def _wait(self, gd: GangDemand, board: Board) -> None:
        key = self._key(gd)
        idle = self._idle.get(key)
        if idle is None:
            online = (v for v in self.pool.views.values() if v.state == WorkerState.ONLINE)
            idle = self._idle[key] = Board(board.fit, gd.gang, (capacity_view(v, self.pool.pipeline) for v in online))
        short = self.waiting[gd.execution_id] = shortfall(gd.gang, gd.demand.request, board, idle)
        if self._holds_left <= 0:
            return
        room = self._preempt(gd, board)
        domain = room.domain if room is not None else short.target.domain if short.target is not None else None
        if domain is None:
            return
        self._holds_left -= 1
        count = min(board.held(domain), gd.gang.size)
        if count:
            hold = seat_members(gd.execution_id, gd.gang, domain, board.seats_in(domain, count), count)
            self.held[gd.execution_id] = hold
            self.changed(claim(hold, self.pool.views, board.fit.filters), booked=board)
            board.took(hold)

    def _preempt(self, gd: GangDemand, board: Board) -> GangRoom | None:
        """Victims across one domain's workers, when ``gd`` may preempt (decided, then told to the contention)."""
        contention = self.contention
        if contention is None or not gd.demand.may_preempt or gd.demand.priority <= contention.floor:
            return None
        priority = gd.demand.priority
        room = gang_room(
            gd,
            [v for v in self.pool.views.values() if v.state == WorkerState.ONLINE],
            contention.by_worker,
            lambda h: h.preemptible and h.priority < priority,
            gang_of={h.execution_id: h.gang for hs in contention.by_worker.values() for h in hs if h.gang},
            namespace=self._key(gd)[1],
            costs=contention.costs,
        )
        if room is None or not room.victims:
            return room
        by_worker: dict[str, list[str]] = {}
        for victim in room.victims:
            by_worker.setdefault(victim.worker, []).append(victim.execution_id)
        for worker, victims in sorted(by_worker.items()):
            contention.preemptions.append(Preemption(gd.execution_id, worker, tuple(victims)))
            gone = set(victims)
            contention.by_worker[worker] = [
                replace(h, leaving=True) if h.execution_id in gone else h for h in contention.by_worker[worker]
            ]
        return room
