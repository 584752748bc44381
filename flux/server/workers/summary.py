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
from typing import AsyncIterator

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from sse_starlette import EventSourceResponse, ServerSentEvent

from flux.domain.events import HOLDING_STATES, WAITING_STATES, ExecutionState
from flux.server import fleet, topics
from flux.server.fleet_trend import PERIOD, FleetSummary
from flux.server.log_routes import FOLLOW_RECHECK, PING, SEND_TIMEOUT, SEP
from flux.server.models import ExecutionModel
from flux.server.services import Services
from flux.server.workers.draining import liveness

log = logging.getLogger(__name__)
#: Seconds a stream lets wake-ups accumulate before it reads again (one read per burst).
COALESCE = 0.5


def read(svc: Services):  # noqa: ANN201 - a function of a session, for ``db.read``
    known = liveness(svc)

    def summary(session: Session) -> FleetSummary:
        workers = fleet.list_workers(session, known)
        live = [w for w in workers if w.state != "OFFLINE"]
        states = dict(session.execute(
            select(ExecutionModel.state, func.count()).where(ExecutionModel.finished_at.is_(None)).group_by(ExecutionModel.state)
        ).all())
        scheduled = ExecutionModel.state == ExecutionState.SCHEDULED.value
        unschedulable, oldest = session.execute(
            select(func.count(ExecutionModel.unschedulable), func.min(ExecutionModel.scheduled_at)).where(scheduled)
        ).one()
        sampled = [w.resources for w in live if w.resources is not None]
        cores = sum(r.cpu_total for r in sampled)
        gpus = [gpu for r in sampled for gpu in r.gpus]
        return FleetSummary(
            gpus=len(gpus),
            gpu_percent=sum(gpu.utilization for gpu in gpus) / len(gpus) if gpus else 0.0,
            resources=_dimensions(sampled),
            workers=dict(Counter(w.state for w in workers)),
            cpu_percent=sum(r.cpu_percent * r.cpu_total for r in sampled) / cores if cores else 0.0,
            memory_used=sum(r.memory_total - r.memory_available for r in sampled),
            memory_total=sum(r.memory_total for r in sampled),
            slots=sum(w.max_concurrent_executions for w in live),
            busy=sum(w.running for w in live),
            queued=states.get(ExecutionState.SCHEDULED.value, 0),
            unschedulable=unschedulable,
            waiting=sum(states.get(state, 0) for state in WAITING_STATES),
            running=sum(states.get(state, 0) for state in HOLDING_STATES),
            oldest_queued_at=oldest,
        )

    return summary


def _dimensions(sampled: list) -> dict[str, list[float]]:
    """Each probed dimension beyond cpu, memory and disk: [in use, total] summed over the samples."""
    totals: dict[str, list[float]] = {}
    for r in sampled:
        for name, total in r.capacity.items():
            used_total = totals.setdefault(name, [0.0, 0.0])
            used_total[0] += total - r.available.get(name, 0)
            used_total[1] += total
    return totals


def stream(svc: Services) -> EventSourceResponse:
    return EventSourceResponse(_summaries(svc), ping=PING, sep=SEP, send_timeout=SEND_TIMEOUT)


async def keep_trend(svc: Services) -> None:
    """The server's loop that samples the summary into ``svc.trend`` every ``PERIOD`` seconds (``flux.server.fleet_trend``)."""
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
