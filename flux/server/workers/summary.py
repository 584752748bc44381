"""``GET /fleet``: the fleet at a glance, for the console's fleet page and for scripts:
workers by state, slots in use, and what waits for them (the queue, the unschedulable
among it, the executions waiting on the server). With ``follow=true`` (or ``Accept:
text/event-stream``) a Server-Sent Events stream of it: one ``fleet`` event whenever a
worker's state, sample or drain changes or an execution changes state, coalesced, and
at least every ``FOLLOW_RECHECK`` seconds (liveness changes with time alone)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import AsyncIterator

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from sse_starlette import EventSourceResponse, ServerSentEvent

from flux.domain.events import HOLDING_STATES, WAITING_STATES, ExecutionState
from flux.domain.resources import CPU, MEMORY
from flux.domain.samples import WIRE_FIELDS
from flux.domain.workers import WorkerState
from flux.server import fleet, topics
from flux.server.fleet_trend import PERIOD, FleetSummary
from flux.server.log_routes import FOLLOW_RECHECK, PING, SEND_TIMEOUT, SEP
from flux.server.models import ExecutionModel, WorkerModel, WorkerResourcesGPUModel, WorkerResourcesModel
from flux.server.services import Services
from flux.server.workers.draining import liveness

log = logging.getLogger(__name__)
#: Seconds a stream lets wake-ups accumulate before it reads again (one read per burst).
COALESCE = 0.5


#: What the summary reads of each worker, as plain rows: reading the fleet through
#: ``fleet.list_workers`` (ORM objects, a ``WorkerInfo`` each) cost ~150 ms of CPU at
#: 1,000 workers, every ``PERIOD`` for the trend, and every thread waited for it.
_WORKERS = select(
    WorkerModel.name,
    WorkerModel.state,
    WorkerModel.draining,
    WorkerModel.max_concurrent_executions,
    WorkerResourcesModel.capacity,
    WorkerResourcesModel.available,
    WorkerResourcesModel.cpu_percent,
).outerjoin(WorkerResourcesModel, WorkerResourcesModel.worker_id == WorkerModel.id)
#: The live workers' GPUs: how many, and their utilisation summed.
_GPUS = (
    select(func.count(WorkerResourcesGPUModel.id), func.coalesce(func.sum(WorkerResourcesGPUModel.utilization), 0.0))
    .join(WorkerModel, WorkerModel.id == WorkerResourcesGPUModel.worker_id)
    .where(WorkerModel.state != WorkerState.OFFLINE)
)


def read(svc: Services):  # noqa: ANN201 - a function of a session, for ``db.read``
    known = liveness(svc)

    def summary(session: Session) -> FleetSummary:
        counts = fleet.running_counts(session)
        states: Counter[str] = Counter()
        slots = busy = 0
        usage = _Usage()
        for row in session.execute(_WORKERS):
            running = counts.get(row.name, 0)
            shown = fleet.shown_state(row.state, row.draining, known(row.name), running)
            states[shown] += 1
            if shown != WorkerState.OFFLINE:
                slots, busy = slots + row.max_concurrent_executions, busy + running
                if row.capacity is not None:
                    usage.add(row.capacity, row.available or {}, row.cpu_percent or 0.0)
        gpus, utilization = session.execute(_GPUS).one()
        executions = dict(
            session.execute(
                select(ExecutionModel.state, func.count())
                .where(ExecutionModel.finished_at.is_(None))
                .group_by(ExecutionModel.state)
            ).all()
        )
        scheduled = ExecutionModel.state == ExecutionState.SCHEDULED.value
        unschedulable, oldest = session.execute(
            select(func.count(ExecutionModel.unschedulable), func.min(ExecutionModel.scheduled_at)).where(scheduled)
        ).one()
        return FleetSummary(
            gpus=gpus,
            gpu_percent=utilization / gpus if gpus else 0.0,
            resources=usage.others,
            workers=dict(states),
            cpu_percent=usage.cpu_busy / usage.cores if usage.cores else 0.0,
            memory_used=usage.memory_used,
            memory_total=usage.memory_total,
            slots=slots,
            busy=busy,
            queued=executions.get(ExecutionState.SCHEDULED.value, 0),
            unschedulable=unschedulable,
            waiting=sum(executions.get(state, 0) for state in WAITING_STATES),
            running=sum(executions.get(state, 0) for state in HOLDING_STATES),
            oldest_queued_at=oldest,
        )

    return summary


@dataclass
class _Usage:
    """The live workers' last samples, summed: cores (and how busy, weighted by cores),
    memory, and each probed dimension beyond cpu, memory and disk as [in use, total]."""

    cores: float = 0.0
    cpu_busy: float = 0.0
    memory_used: float = 0.0
    memory_total: float = 0.0
    others: dict[str, list[float]] = field(default_factory=dict)

    def add(self, capacity: dict, available: dict, cpu_percent: float) -> None:
        cores = capacity.get(CPU, 0)
        self.cores += cores
        self.cpu_busy += cpu_percent * cores
        self.memory_total += capacity.get(MEMORY, 0)
        self.memory_used += capacity.get(MEMORY, 0) - available.get(MEMORY, 0)
        for name, total in capacity.items():
            if name not in WIRE_FIELDS:
                used_total = self.others.setdefault(name, [0.0, 0.0])
                used_total[0] += total - available.get(name, 0)
                used_total[1] += total


def stream(svc: Services) -> EventSourceResponse:
    return EventSourceResponse(_summaries(svc), ping=PING, sep=SEP, send_timeout=SEND_TIMEOUT)


async def keep_trend(svc: Services) -> None:
    """The server's loop that samples the summary into ``svc.trend`` every ``PERIOD`` seconds
    (``flux.server.fleet_trend``)."""
    while True:
        try:
            svc.trend.add(await svc.db.read(read(svc), counted=False))
        except Exception:  # noqa: BLE001 - a missed point is a gap in a chart, not a reason to stop
            log.exception("fleet trend: a sample failed")
        await asyncio.sleep(PERIOD)


async def _summaries(svc: Services) -> AsyncIterator[ServerSentEvent]:
    with svc.notifier.subscribe(topics.FLEET) as woken:
        while not svc.notifier.stopped:
            woken.clear()  # before reading: no wake-up falls between the read and the wait
            summary = await svc.db.read(read(svc))
            yield ServerSentEvent(summary.model_dump_json(), event="fleet", sep=SEP)
            await asyncio.sleep(COALESCE)
            await svc.notifier.wait(woken, FOLLOW_RECHECK)
