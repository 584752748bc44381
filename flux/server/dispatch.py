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
import time
from collections import defaultdict
from dataclasses import replace

from sqlalchemy import select, text, tuple_
from sqlalchemy.orm import Session, selectinload

from flux.domain.events import HOLDING_STATES, EventType, ExecutionState
from flux.models import ExecutionModel, WorkerModel
from flux.scheduling.allocation import with_allotments
from flux.scheduling.explain import infeasibility, summarize, verdict
from flux.scheduling.matching import GPU, WorkerView
from flux.scheduling.placement import Placement, demand_from_row, place
from flux.server import executions, fleet
from flux.server.database import Database
from flux.server.metrics import ServerMetrics
from flux.server.notify import Notifier
from flux.server.registry import FleetRegistry

log = logging.getLogger("flux.server.dispatch")

#: How many queued executions one round considers (oldest first).
ROUND_SIZE = 1000
#: Seconds between rounds while executions wait, and with an empty queue.
BACKLOG_ROUND, IDLE_ROUND = 1.0, 60.0


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


def _view(worker: WorkerModel) -> WorkerView:
    return WorkerView(
        name=worker.name,
        labels=dict(worker.labels or {}),
        packages={p.name: p.version for p in worker.packages},
        slots=worker.max_concurrent_executions,
        allocation=worker.allocation,
        custom_total=dict(worker.custom_resources or {}),
        registered_seq=worker.id,
        **_resources(worker),
    )


def _with_resources(view: WorkerView, worker: WorkerModel) -> WorkerView:
    return replace(view, **_resources(worker))


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

    def kick(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=BACKLOG_ROUND if self._backlog else IDLE_ROUND)
            self._wake.clear()
            try:
                if self._backlog:
                    for execution_id in await self.db.run(lambda s: executions.expire_pending(s, time.time())):
                        self.notifier.notify(f"execution:{execution_id}")
                assigned, self._backlog = await self.db.run(self._round)
            except Exception:  # noqa: BLE001 - a failed round (e.g. a replica race) is retried next time
                log.exception("dispatch round failed; retrying")
                self._backlog = True
                await asyncio.sleep(0.1)
                continue
            for worker_name, waited in assigned:
                self.metrics.observe_dispatch(worker_name, waited)
            for worker_name in {worker_name for worker_name, _ in assigned}:
                self.notifier.notify(f"worker:{worker_name}")


    def fleet(self, session: Session) -> list[WorkerView]:
        """Views of every worker that is not OFFLINE, reloading only what changed.

        STALE and DRAINING workers are included (with no free slots) so that
        explanations and feasibility can name them.
        """
        rows = session.execute(
            select(
                WorkerModel.id,
                WorkerModel.name,
                WorkerModel.resources_version,
                WorkerModel.registered_at,
                WorkerModel.draining,
            ).where(WorkerModel.state != fleet.OFFLINE)
        ).all()
        now = time.time()
        stale = [row.id for row in rows if self._views.get(row.name, (None, None))[:2] != (row.resources_version, row.registered_at)]
        if stale:
            loaded = session.scalars(
                select(WorkerModel)
                .where(WorkerModel.id.in_(stale))
                .options(selectinload(WorkerModel.resources), selectinload(WorkerModel.gpus))
            )
            for worker in loaded:
                cached = self._views.get(worker.name)
                if cached and cached[1] == worker.registered_at:
                    view = _with_resources(cached[2], worker)  # a heartbeat: packages and labels are unchanged
                else:
                    view = _view(worker)
                self._views[worker.name] = (worker.resources_version, worker.registered_at, view)
        live = {row.name for row in rows}
        for gone in set(self._views) - live:  # evicted or renamed: drop their cached views
            del self._views[gone]
        held: dict[str, list[dict]] = defaultdict(list)
        for worker_name, allotment in session.execute(
            select(ExecutionModel.worker_name, ExecutionModel.allotment).where(ExecutionModel.state.in_(HOLDING_STATES))
        ):
            held[worker_name].append(allotment or {})
        return [
            with_allotments(
                replace(
                    self._views[row.name][2],
                    running=len(held[row.name]),
                    state="DRAINING" if row.draining else self.registry.liveness(self.registry.members.get(row.name), now),
                ),
                held[row.name],
            )
            for row in rows
        ]

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
        """One placement pass over the queue, oldest first, page by page while slots remain.

        Paging means executions that fit nowhere cannot block newer ones behind them
        (no head-of-line blocking), however many of them there are. Returns
        (worker, seconds the execution waited) per assignment, and whether any
        execution was left waiting.
        """
        first = self._pending(session, None)
        if not first:
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
        while page and any(w.free_slots > 0 for w in workers):
            placements += place((demand_from_row(*row[:4]) for row in page), workers)
            if len(page) < ROUND_SIZE:
                break
            page = self._pending(session, (page[-1].scheduled_at, page[-1].id))
        placed = {p.execution_id for p in placements}
        self._record_waiting(session, first, placed, workers)
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
        for placement in placements:
            execution = rows[placement.execution_id]
            execution.state = ExecutionState.CLAIMED.value
            execution.worker_name = placement.worker_name
            execution.attempt += 1
            execution.delivered = False
            execution.claimed_at = now
            execution.allotment = placement.allotment or None
            executions.append_event(
                session,
                execution,
                EventType.WORKFLOW_CLAIMED,
                name=execution.workflow_name,
                value={
                    "worker": placement.worker_name,
                    "attempt": execution.attempt,
                    "reason": placement.reason,
                    "allotment": placement.allotment,
                },
                at=now,
                worker_name=placement.worker_name,
            )
        return [(p.worker_name, now - rows[p.execution_id].pending_since) for p in placements], backlog

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
                executions.append_event(
                    session, execution, EventType.WORKFLOW_UNSCHEDULABLE, name=execution.workflow_name, value={"reason": infeasible}
                )
            if summary != execution.placement_note:
                executions.append_event(
                    session, execution, EventType.WORKFLOW_PENDING, name=execution.workflow_name, value={"summary": summary}
                )
            execution.placement_note, execution.unschedulable = summary, infeasible
