"""The dispatcher: one background loop per server that places queued executions.

It runs a placement round whenever something changes (a submission, a slot freed,
a registration, a sample that moved, a worker gone stale). While executions wait
unplaced it also runs once a second (pending timeouts, and changes it was not told
about); with an empty queue it only runs a safety round every ``IDLE_ROUND``
seconds, so an idle fleet costs it nothing. Assignment is a conditional update of
the execution row (optimistic concurrency), so replicas sharing one database never
double-assign. Worker liveness comes from the fleet registry, not the database;
the views it places on come from ``flux.server.snapshot``, and the notes on what
still waits from ``flux.server.explain``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time

from sqlalchemy import select, text, tuple_
from sqlalchemy.orm import Session

from flux.domain.events import ExecutionState
from flux.server.models import ExecutionModel
from flux.scheduling.demand import demand_from_row
from flux.scheduling.placement import Placement, place
from flux.server import executions, topics
from flux.server.database import Database
from flux.server.eventlog import INSERT_EVENT
from flux.server.explain import record_waiting
from flux.server.metrics import Claimed, ServerMetrics
from flux.server.notify import Notifier
from flux.server.registry import FleetRegistry
from flux.server.snapshot import FleetSnapshot

log = logging.getLogger("flux.server.dispatch")

#: How many queued executions one round considers (oldest first).
ROUND_SIZE = 1000
#: Seconds between rounds while executions wait, and with an empty queue.
BACKLOG_ROUND, IDLE_ROUND = 1.0, 60.0
#: A round slower than this is logged: placement is meant to take milliseconds.
SLOW_ROUND = 1.0
#: With an empty queue, the fleet's changes are read at most this often (``_keep_warm``).
WARM_SCAN = 1.0
#: The PostgreSQL advisory lock a replica holds while it places (one places at a time).
PLACEMENT_LOCK = 727073
#: Another replica holds the placement lock: try again this soon (its rounds take milliseconds).
LOCK_RETRY = 0.05


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
        #: The fleet as placement sees it (``flux.server.snapshot``).
        self.snapshot = FleetSnapshot(registry)
        #: When the earliest execution backing off after a crash may be placed.
        self._next_ready = math.inf

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
                        self.notifier.notify(topics.execution(execution_id))
                round_started = time.monotonic()
                assigned, self._backlog = await self.db.run(self._round)
                self.metrics.rounds.labels(part="total").observe(time.monotonic() - round_started)
                if time.monotonic() - started > SLOW_ROUND:
                    log.warning("dispatch round took %.2fs (database queue: %d waiting)", time.monotonic() - started, self.db.backlog()[0])
            except Exception:  # noqa: BLE001 - a failed round (e.g. a replica race) is retried next time
                log.exception("dispatch round failed; retrying")
                self._backlog = True
                self.snapshot.invalidate()
                await asyncio.sleep(0.1)
                continue
            for claimed in assigned:
                self.metrics.observe_dispatch(claimed)
            for worker_name in {claimed.worker for claimed in assigned}:
                self.notifier.notify(topics.worker(worker_name))


    def _pending(self, session: Session, after: tuple[float, str] | None) -> list:
        query = (
            select(
                ExecutionModel.id,
                ExecutionModel.requests,
                ExecutionModel.affinity,
                ExecutionModel.routing,
                ExecutionModel.namespace,
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

    def _round(self, session: Session) -> tuple[list[Claimed], bool]:
        started, cpu = time.perf_counter(), time.thread_time()
        with self.snapshot.lock:  # the round changes the views it places on in place
            placed = self._place(session)
        self.metrics.rounds.labels(part="work").observe(time.perf_counter() - started)
        self.metrics.rounds.labels(part="cpu").observe(time.thread_time() - cpu)
        return placed

    def _place(self, session: Session) -> tuple[list[Claimed], bool]:
        """One placement pass over the queue, oldest first, page by page while slots remain.

        Paging means executions that fit nowhere cannot block newer ones behind them
        (no head-of-line blocking), however many of them there are. Returns
        a ``Claimed`` per assignment (worker, namespace, workflow, seconds waited), and whether any
        execution was left waiting.
        """
        first = self._pending(session, None)
        if not first:
            self._keep_warm(session)
            return [], False
        if session.bind.dialect.name == "postgresql" and not session.scalar(
            text(f"SELECT pg_try_advisory_xact_lock({PLACEMENT_LOCK})")
        ):
            # Another replica is placing right now. Placement needs a consistent view of
            # every worker's free slots and reservations, so one replica places at a time;
            # this one tries again as soon as that round is likely over. (Waiting for the
            # next backlog tick, a second away, was the tail of submit->claimed with two
            # replicas: a submission that met the other's round waited ~1 s.)
            self._next_ready = min(self._next_ready, time.time() + LOCK_RETRY)
            return [], True
        workers = self.snapshot.views(session)
        pool = self.snapshot.pool
        placements: list[Placement] = []
        page = first
        now = time.time()
        while page and pool.best() is not None:
            demands = (
                demand_from_row(
                    execution_id=row.id, requests=row.requests, affinity=row.affinity, routing=row.routing, namespace=row.namespace
                )
                for row in page
                if self._ready(row, now)
            )
            placements += place(demands, pool)
            if len(page) < ROUND_SIZE:
                break
            page = self._pending(session, (page[-1].scheduled_at, page[-1].id))
        self.snapshot.placed_on({p.worker_name for p in placements})
        placed = {p.execution_id for p in placements}
        record_waiting(session, [row for row in first if self._ready(row, now)], placed, workers)
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
            claimed_events += executions.claim(rows[placement.execution_id], placement.worker_name, placement.allotment, placement.reason, now)
        session.execute(INSERT_EVENT, claimed_events)  # one statement; the rows' updates flush first
        claimed = []
        for p in placements:
            row = rows[p.execution_id]
            claimed.append(Claimed(p.worker_name, row.namespace, row.workflow_name, now - row.pending_since))
        return claimed, backlog

    def _keep_warm(self, session: Session) -> None:
        """With nothing to place, read what changed in the fleet so that the next
        submission does not pay for a registration storm, but at most once every
        ``WARM_SCAN`` seconds: a scan reads every worker's row, and a storm of a
        thousand registrations kicked a round, and so a scan, for each."""
        if not self.snapshot.changed_since_scan():
            return
        if self.snapshot.seconds_since_scan() >= WARM_SCAN:
            self.snapshot.views(session)
        else:  # come back for it once the period is over
            self._next_ready = min(self._next_ready, time.time() + WARM_SCAN - self.snapshot.seconds_since_scan())

    def _ready(self, row, now: float) -> bool:  # noqa: ANN001 - a row of _pending
        """False while the execution backs off after a crashed attempt; the loop then
        wakes when the earliest backoff ends."""
        if row.ready_at is None or row.ready_at <= now:
            return True
        self._next_ready = min(self._next_ready, row.ready_at)
        return False

