"""``GET /fleet``: the fleet at a glance, for the console's fleet page and for scripts:
workers by state, slots in use, and what waits for them (the queue, the unschedulable
among it, the executions waiting on the server). With ``follow=true`` (or ``Accept:
text/event-stream``) a Server-Sent Events stream of it: one ``fleet`` event whenever a
worker's state, sample or drain changes or an execution changes state, coalesced, and
at least every ``FOLLOW_RECHECK`` seconds (liveness changes with time alone)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import AsyncIterator

from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from sse_starlette import EventSourceResponse, ServerSentEvent

from flux.domain.events import HOLDING_STATES, WAITING_STATES, ExecutionState
from flux.server import fleet, topics
from flux.server.log_routes import FOLLOW_RECHECK, PING, SEND_TIMEOUT, SEP
from flux.server.models import ExecutionModel
from flux.server.services import Services
from flux.server.workers.draining import liveness

#: Seconds a stream lets wake-ups accumulate before it reads again (one read per burst).
COALESCE = 0.5


class FleetSummary(BaseModel):
    """The fleet and its queue, across namespaces (reading it is ``read_fleet``)."""

    workers: dict[str, int] = Field(description="Workers by state: ONLINE, DRAINING, DRAINED, OFFLINE")
    slots: int = Field(description="Execution slots of the live workers")
    busy: int = Field(description="Of those, slots running an execution")
    queued: int = Field(description="Executions waiting for a worker (SCHEDULED)")
    unschedulable: int = Field(description="Of those, the ones no registered worker could ever take")
    waiting: int = Field(description="Executions waiting on the server: SLEEPING, PAUSED, AWAITING_CHILD")
    running: int = Field(description="Executions a worker holds: CLAIMED, RUNNING, CANCELLING")
    oldest_queued_at: float | None = Field(description="When the longest-queued execution was scheduled")


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
        return FleetSummary(
            workers=dict(Counter(w.state for w in workers)),
            slots=sum(w.max_concurrent_executions for w in live),
            busy=sum(w.running for w in live),
            queued=states.get(ExecutionState.SCHEDULED.value, 0),
            unschedulable=unschedulable,
            waiting=sum(states.get(state, 0) for state in WAITING_STATES),
            running=sum(states.get(state, 0) for state in HOLDING_STATES),
            oldest_queued_at=oldest,
        )

    return summary


def stream(svc: Services) -> EventSourceResponse:
    return EventSourceResponse(_summaries(svc), ping=PING, sep=SEP, send_timeout=SEND_TIMEOUT)


async def _summaries(svc: Services) -> AsyncIterator[ServerSentEvent]:
    with svc.notifier.subscribe(topics.FLEET) as woken:
        while not svc.notifier.stopped:
            woken.clear()  # before reading: no wake-up falls between the read and the wait
            summary = await svc.db.read(read(svc))
            yield ServerSentEvent(summary.model_dump_json(), event="fleet", sep=SEP)
            await asyncio.sleep(COALESCE)
            await svc.notifier.wait(woken, FOLLOW_RECHECK)
