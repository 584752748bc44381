"""The dispatcher: one background loop per server that places queued executions.

It runs a placement round whenever something changes (a submission, a slot freed,
a registration, a sample that moved, a worker gone stale). While executions wait
unplaced it also runs once a second (pending timeouts, and changes it was not told
about); with an empty queue it only runs a safety round every ``IDLE_ROUND``
seconds, so an idle fleet costs it nothing. Assignment is a conditional update of
the execution row (optimistic concurrency), so replicas sharing one database never
double-assign. Worker liveness comes from the fleet registry, not the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import threading
import time

from sqlalchemy import select, text, tuple_
from sqlalchemy.orm import Session, selectinload

from flux.domain.events import HOLDING_STATES, EventType, ExecutionState
from flux.models import ExecutionModel, WorkerModel, WorkerPackageModel
from flux.scheduling.allocation import with_allotments
from flux.scheduling.explain import infeasibility, summarize, verdict
from flux.scheduling.matching import GPU, WorkerView
from flux.scheduling.placement import Placement, demand_from_row, place
from flux.server import attempts, executions
from flux.server.eventlog import INSERT_EVENT, append_event
from flux.server.database import Database
from flux.server.metrics import ServerMetrics
from flux.server.notify import Notifier
from flux.server.registry import OFFLINE, ONLINE, STALE, FleetRegistry

log = logging.getLogger("flux.server.dispatch")

#: How many queued executions one round considers (oldest first).
ROUND_SIZE = 1000
#: Seconds between rounds while executions wait, and with an empty queue.
BACKLOG_ROUND, IDLE_ROUND = 1.0, 60.0
#: The workers table is re-read at least this often even if nothing said it changed.
FLEET_RESCAN = 10.0
#: A round slower than this is logged: placement is meant to take milliseconds.
SLOW_ROUND = 1.0


def _signature(allotments: list[dict] | tuple) -> tuple:
    return tuple(sorted(json.dumps(a, sort_keys=True) for a in allotments)) if allotments else ()


def _resources(worker: WorkerModel) -> dict:
    r = worker.resources
    metrics = {name: value for name, value in (r.metrics or {}).items() if math.isfinite(value)}
    return dict(
        metrics=metrics,
        cpu_total=r.cpu_total,
        cpu_available=r.cpu_available,
        memory_total=r.memory_total,
        memory_available=r.memory_available,
        disk_total=r.disk_total,
        disk_free=r.disk_free,
        gpus=tuple(
            GPU(g.index, g.uuid, g.name, g.memory_total, g.memory_available, g.utilization) for g in worker.gpus
        ),
    )


def _view(worker: WorkerModel, packages: dict[str, str]) -> WorkerView:
    return WorkerView(
        name=worker.name,
        labels=dict(worker.labels or {}),
        packages=packages,
        slots=worker.max_concurrent_executions,
        allocation=worker.allocation,
        custom_total=dict(worker.custom_resources or {}),
        registered_seq=worker.id,
        **_resources(worker),
    )


def _with_resources(view: WorkerView, worker: WorkerModel) -> WorkerView:
    return view.evolve(**_resources(worker))


class Dispatcher:
    def __init__(self, db: Database, notifier: Notifier, registry: FleetRegistry, metrics: ServerMetrics):
        self.db = db
        self.metrics = metrics
        self.notifier = notifier
        self.registry = registry
        self._wake = asyncio.Event()
        self._wake.set()  # the first round runs at once: whatever waited while the server was down
        #: Executions were left waiting by the last round (or it failed): keep looking.
        self._backlog = True
        #: Worker views by name, with the (resources_version, registered_at) they were built from.
        self._views: dict[str, tuple[int, float, WorkerView]] = {}
        #: The rows of the last scan, and the registry's fleet version it saw.
        self._rows: list = []
        self._fleet_version = -1
        self._scanned_at = 0.0
        #: Each worker's view as the last round used it, keyed by what it was built from.
        self._round_views: dict[str, tuple[tuple, WorkerView, WorkerView]] = {}
        #: Workers the last round placed work on: their round views were changed in place.
        self._touched: set[str] = set()
        #: The current round views in scan order, each worker's index, who held work last time.
        self._views_now: list = []
        self._position: dict[str, int] = {}
        self._holding: set[str] = set()
        #: When the earliest execution backing off after a crash may be placed.
        self._next_ready = math.inf
        #: The caches above are shared by rounds and by readers of ``fleet``.
        self._lock = threading.RLock()

    def kick(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            timeout = min(BACKLOG_ROUND if self._backlog else IDLE_ROUND, max(0.0, self._next_ready - time.time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            self._wake.clear()
            self._next_ready = math.inf
            try:
                started = time.monotonic()
                if self._backlog:
                    for execution_id in await self.db.run(lambda s: executions.expire_pending(s, time.time())):
                        self.notifier.notify(f"execution:{execution_id}")
                assigned, self._backlog = await self.db.run(self._round)
                if time.monotonic() - started > SLOW_ROUND:
                    log.warning("dispatch round took %.2fs (database queue: %d waiting)", time.monotonic() - started, self.db.backlog()[0])
            except Exception:  # noqa: BLE001 - a failed round (e.g. a replica race) is retried next time
                log.exception("dispatch round failed; retrying")
                self._backlog = True
                self._round_views.clear()  # the failed round may have changed some in place
                self._fleet_version = -1
                await asyncio.sleep(0.1)
                continue
            for worker_name, waited in assigned:
                self.metrics.observe_dispatch(worker_name, waited)
            for worker_name in {worker_name for worker_name, _ in assigned}:
                self.notifier.notify(f"worker:{worker_name}")


    def fleet(self, session: Session) -> list[WorkerView]:
        """``_fleet`` under the dispatcher's lock: on PostgreSQL database work runs on
        several threads, and explanations and registrations read the fleet beside rounds."""
        with self._lock:
            return self._fleet(session)

    def _fleet(self, session: Session) -> list[WorkerView]:
        """Views of every worker that is not OFFLINE, reloading only what changed.

        STALE and DRAINING workers are included (with no free slots) so that
        explanations and feasibility can name them. A round must cost about the same
        with a thousand idle workers as with ten, so nothing here is redone per worker
        unless that worker changed: the workers table is scanned only when the
        registry says the fleet changed (a registration, a sample that moved, a drain,
        a worker gone stale or back, here or on another replica) or every
        ``FLEET_RESCAN`` seconds as a safety net; a worker's round view is rebuilt
        only when what it holds changed or the last round placed work on it.
        """
        registry = self.registry
        held: dict[str, list[dict]] = {}
        for worker_name, allotment in session.execute(
            select(ExecutionModel.worker_name, ExecutionModel.allotment).where(ExecutionModel.state.in_(HOLDING_STATES))
        ):
            held.setdefault(worker_name, []).append(allotment or {})
        if self._fleet_version != registry.fleet_version or time.monotonic() - self._scanned_at > FLEET_RESCAN:
            self._fleet_version = registry.fleet_version
            self._scanned_at = time.monotonic()
            self._rows = self._scan(session)
            rows = self._rows
            self._position = {row.name: i for i, row in enumerate(rows)}
            self._views_now = [None] * len(rows)
        else:  # only workers that hold, held, or were just given something can differ
            rows = [self._rows[self._position[n]] for n in {*held, *self._holding, *self._touched} if n in self._position]
        for row in rows:
            base = self._views[row.name][2]
            member = registry.members.get(row.name)
            if row.draining or (member is not None and member.leaving):
                state = "DRAINING"
            else:
                state = STALE if member is not None and member.stale_since else ONLINE
            allotments = held.get(row.name, ())
            key = (id(base), state, _signature(allotments))  # the cache entry keeps base alive: ids stay unique
            cached = self._round_views.get(row.name)
            if cached is None or cached[0] != key or row.name in self._touched:
                view = with_allotments(base.evolve(running=len(allotments), state=state), allotments)
                cached = self._round_views[row.name] = (key, view, base)
            self._views_now[self._position[row.name]] = cached[1]
        self._holding = set(held)
        self._touched = set()
        return self._views_now

    def _scan(self, session: Session) -> list:
        rows = session.execute(
            select(
                WorkerModel.id,
                WorkerModel.name,
                WorkerModel.resources_version,
                WorkerModel.registered_at,
                WorkerModel.draining,
            ).where(WorkerModel.state != OFFLINE)
        ).all()
        changed = [row.id for row in rows if self._views.get(row.name, (None, None))[:2] != (row.resources_version, row.registered_at)]
        if changed:
            loaded = session.scalars(
                select(WorkerModel)
                .where(WorkerModel.id.in_(changed))
                .options(selectinload(WorkerModel.resources), selectinload(WorkerModel.gpus))
            )
            loaded = list(loaded)
            new = [w.id for w in loaded if not (w.name in self._views and self._views[w.name][1] == w.registered_at)]
            packages: dict[int, dict[str, str]] = {worker_id: {} for worker_id in new}
            if new:  # plain rows, one query: ~120 per worker, a thousand workers after a restart
                for worker_id, name, version in session.execute(
                    select(WorkerPackageModel.worker_id, WorkerPackageModel.name, WorkerPackageModel.version).where(
                        WorkerPackageModel.worker_id.in_(new)
                    )
                ):
                    packages[worker_id][name] = version
            for worker in loaded:
                if worker.id in packages:
                    view = _view(worker, packages[worker.id])
                else:
                    view = _with_resources(self._views[worker.name][2], worker)  # a sample moved; nothing else did
                self._views[worker.name] = (worker.resources_version, worker.registered_at, view)
        live = {row.name for row in rows}
        for gone in set(self._views) - live:  # evicted or renamed: drop their cached views
            del self._views[gone]
            self._round_views.pop(gone, None)
        return rows

    def _pending(self, session: Session, after: tuple[float, str] | None) -> list:
        query = (
            select(
                ExecutionModel.id,
                ExecutionModel.requests,
                ExecutionModel.affinity,
                ExecutionModel.routing,
                ExecutionModel.scheduled_at,
                ExecutionModel.placement_note,
                ExecutionModel.unschedulable,
                ExecutionModel.ready_at,
            )
            .where(ExecutionModel.state == ExecutionState.SCHEDULED.value)
            .order_by(ExecutionModel.scheduled_at, ExecutionModel.id)
            .limit(ROUND_SIZE)
            # PostgreSQL: replicas placing at once split the queue instead of colliding
            # (SQLite has one writer and renders no FOR UPDATE).
            .with_for_update(skip_locked=True, of=ExecutionModel)
        )
        if after is not None:
            query = query.where(tuple_(ExecutionModel.scheduled_at, ExecutionModel.id) > after)
        return session.execute(query).all()

    def _round(self, session: Session) -> tuple[list[tuple[str, float]], bool]:
        with self._lock:  # the round changes the views it places on in place
            return self._place(session)

    def _place(self, session: Session) -> tuple[list[tuple[str, float]], bool]:
        """One placement pass over the queue, oldest first, page by page while slots remain.

        Paging means executions that fit nowhere cannot block newer ones behind them
        (no head-of-line blocking), however many of them there are. Returns
        (worker, seconds the execution waited) per assignment, and whether any
        execution was left waiting.
        """
        first = self._pending(session, None)
        if not first:
            if self._fleet_version != self.registry.fleet_version:
                self.fleet(session)  # keep views warm: the next submission should not pay for a registration storm
            return [], False
        if session.bind.dialect.name == "postgresql" and not session.scalar(
            text("SELECT pg_try_advisory_xact_lock(727073)")
        ):
            # Another replica is placing right now. Placement needs a consistent view of
            # every worker's free slots and reservations, so one replica places at a time;
            # this one tries again on its next tick (at most a second away).
            return [], True
        workers = self.fleet(session)
        placements: list[Placement] = []
        page = first
        now = time.time()
        while page and any(w.free_slots > 0 for w in workers):
            placements += place((demand_from_row(*row[:4]) for row in page if self._ready(row, now)), workers)
            if len(page) < ROUND_SIZE:
                break
            page = self._pending(session, (page[-1].scheduled_at, page[-1].id))
        self._touched = {p.worker_name for p in placements}
        placed = {p.execution_id for p in placements}
        self._record_waiting(session, [row for row in first if self._ready(row, now)], placed, workers)
        backlog = len(first) >= ROUND_SIZE or any(row.id not in placed for row in first)
        if not placements:
            return [], backlog
        rows = {
            e.id: e
            for e in session.scalars(
                select(ExecutionModel).where(ExecutionModel.id.in_([p.execution_id for p in placements]))
            )
        }
        now = time.time()
        claimed_events: list[dict] = []
        for placement in placements:
            claimed_events += attempts.start(rows[placement.execution_id], placement.worker_name, placement.allotment, placement.reason, now)
        session.execute(INSERT_EVENT, claimed_events)  # one statement; the rows' updates flush first
        return [(p.worker_name, now - rows[p.execution_id].pending_since) for p in placements], backlog

    def _ready(self, row, now: float) -> bool:  # noqa: ANN001 - a row of _pending
        """False while the execution backs off after a crashed attempt; the loop then
        wakes when the earliest backoff ends."""
        if row.ready_at is None or row.ready_at <= now:
            return True
        self._next_ready = min(self._next_ready, row.ready_at)
        return False

    def _record_waiting(self, session: Session, page: list, placed: set[str], workers: list[WorkerView]) -> None:
        """Note on each still-waiting execution why, when the reason is new or has changed.

        Explanations are computed once per distinct set of constraints, against the
        fleet as this round left it.
        """
        explained: dict[tuple, tuple[str, str | None]] = {}
        for row in page:
            if row.id in placed:
                continue
            key = (json.dumps(row.requests, sort_keys=True), json.dumps(row.affinity, sort_keys=True))
            if key not in explained:
                demand = demand_from_row(row.id, row.requests, row.affinity)
                summary = summarize([verdict(demand.request, demand.affinity, w) for w in workers])
                explained[key] = (summary, infeasibility(demand.request, demand.affinity, workers))
            summary, infeasible = explained[key]
            if (summary, infeasible) == (row.placement_note, row.unschedulable):
                continue
            execution = session.get(ExecutionModel, row.id)
            if infeasible and infeasible != execution.unschedulable:
                append_event(
                    session, execution, EventType.WORKFLOW_UNSCHEDULABLE, name=execution.workflow_name, value={"reason": infeasible}
                )
            if summary != execution.placement_note:
                append_event(
                    session, execution, EventType.WORKFLOW_PENDING, name=execution.workflow_name, value={"summary": summary}
                )
            execution.placement_note, execution.unschedulable = summary, infeasible
