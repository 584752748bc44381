"""The dispatcher: one background loop per server that places queued executions.

It runs a placement round whenever something changes (a submission, a worker
asking for work, a slot freed, a registration) and at least once a second, and it
sweeps for silent workers. Assignment is a conditional update of the execution row
(optimistic concurrency), so replicas sharing one database never double-assign.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from flux.domain.events import EventType, ExecutionState
from flux.models import ExecutionModel, WorkerModel
from flux.scheduling.matching import GPU, WorkerView
from flux.scheduling.placement import demand_from_row, place
from flux.server import executions, fleet
from flux.server.database import Database
from flux.server.notify import Notifier

log = logging.getLogger("flux.server.dispatch")

#: How many queued executions one round considers (oldest first).
ROUND_SIZE = 1000


def _view(worker: WorkerModel) -> WorkerView:
    r = worker.resources
    return WorkerView(
        name=worker.name,
        labels=dict(worker.labels or {}),
        cpu_total=r.cpu_total,
        cpu_available=r.cpu_available,
        memory_total=r.memory_total,
        memory_available=r.memory_available,
        disk_total=r.disk_total,
        disk_free=r.disk_free,
        gpus=tuple(
            GPU(g.index, g.uuid, g.name, g.memory_total, g.memory_available, g.utilization) for g in worker.gpus
        ),
        packages={p.name: p.version for p in worker.packages},
        slots=worker.max_concurrent_executions,
        registered_seq=worker.id,
    )


class Dispatcher:
    def __init__(self, db: Database, notifier: Notifier, eviction_grace_period: float):
        self.db = db
        self.notifier = notifier
        self.eviction_grace_period = eviction_grace_period
        self._wake = asyncio.Event()
        #: Worker views by name, with the resources_version they were built from.
        self._views: dict[str, tuple[int, WorkerView]] = {}

    def kick(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        sweep_every = min(1.0, self.eviction_grace_period / 4)
        next_sweep = 0.0
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=sweep_every)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + sweep_every
                    evicted = await self.db.run(lambda s: fleet.sweep(s, self.eviction_grace_period))
                    for name in evicted:
                        log.warning("evicted worker %s after %.1fs without heartbeat", name, self.eviction_grace_period)
                assigned = await self.db.run(self._round)
            except Exception:  # noqa: BLE001 - a failed round (e.g. a replica race) is retried next time
                log.exception("dispatch round failed; retrying")
                await asyncio.sleep(0.1)
                continue
            for worker_name in assigned:
                self.notifier.notify(f"worker:{worker_name}")

    def _fleet(self, session: Session) -> list[WorkerView]:
        rows = session.execute(
            select(WorkerModel.id, WorkerModel.name, WorkerModel.resources_version).where(
                WorkerModel.state == fleet.ONLINE
            )
        ).all()
        stale = [row.id for row in rows if self._views.get(row.name, (None,))[0] != row.resources_version]
        if stale:
            loaded = session.scalars(
                select(WorkerModel)
                .where(WorkerModel.id.in_(stale))
                .options(selectinload(WorkerModel.resources), selectinload(WorkerModel.gpus), selectinload(WorkerModel.packages))
            )
            for worker in loaded:
                self._views[worker.name] = (worker.resources_version, _view(worker))
        counts = fleet.running_counts(session)
        return [replace(self._views[row.name][1], running=counts.get(row.name, 0)) for row in rows]

    def _round(self, session: Session) -> set[str]:
        pending = session.execute(
            select(ExecutionModel.id, ExecutionModel.requests, ExecutionModel.affinity)
            .where(ExecutionModel.state == ExecutionState.SCHEDULED.value)
            .order_by(ExecutionModel.scheduled_at, ExecutionModel.id)
            .limit(ROUND_SIZE)
        ).all()
        if not pending:
            return set()
        workers = self._fleet(session)
        if not any(w.free_slots > 0 for w in workers):
            return set()
        assignments = place((demand_from_row(*row) for row in pending), workers)
        if not assignments:
            return set()
        rows = {
            e.id: e
            for e in session.scalars(select(ExecutionModel).where(ExecutionModel.id.in_([a[0] for a in assignments])))
        }
        now = time.time()
        for execution_id, worker_name in assignments:
            execution = rows[execution_id]
            execution.state = ExecutionState.CLAIMED.value
            execution.worker_name = worker_name
            execution.attempt += 1
            execution.delivered = False
            execution.claimed_at = now
            executions.append_event(
                session,
                execution,
                EventType.WORKFLOW_CLAIMED,
                name=execution.workflow_name,
                value={"worker": worker_name, "attempt": execution.attempt},
                at=now,
                worker_name=worker_name,
            )
        return {worker_name for _, worker_name in assignments}
