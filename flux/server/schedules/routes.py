"""The routes of schedules (``/schedules``, docs/schedules.md): thin, like every route:
one transaction, then wake the firing loop (here and on other replicas) or dispatch."""

from __future__ import annotations

import json
from typing import AsyncIterator

from fastapi import APIRouter, Depends, Query, Request, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from flux.server import topics
from flux.server.auth import CLIENT
from flux.server.errors import responses
from flux.server.log_routes import FOLLOW_RECHECK, PING, SEND_TIMEOUT, SEP, wants_stream
from flux.server.schedules import store
from flux.server.schedules.schemas import ScheduleCreate, ScheduleInfo, ScheduleUpdate
from flux.server.schemas import ExecutionInfo
from flux.server.scope import namespace
from flux.server.services import Services, services

READ = responses(401, 413, 422)
READ_ONE = responses(401, 404, 413, 422)
CHANGE = responses(401, 404, 409, 413, 422)


router = APIRouter(prefix="/schedules", tags=["schedules"], dependencies=CLIENT)
SVC = Depends(services)
NS = Depends(namespace)


async def change(svc: Services, fn):  # noqa: ANN001, ANN202 - a store function of a Session
    result = await svc.db.run(fn)
    svc.notifier.notify(topics.SCHEDULES)
    return result


@router.post("", response_model=ScheduleInfo, status_code=201, responses=CHANGE)
async def create_schedule(body: ScheduleCreate, ns: str = NS, svc: Services = SVC):
    """A workflow on cron, every interval, or once at a time, firing into the namespace;
    422 (nothing stored) for a bad one."""
    return await change(svc, lambda s: store.create(s, ns, body))


@router.get("", response_model=list[ScheduleInfo], responses=READ)
async def list_schedules(
    request: Request,
    follow: bool = Query(default=False, description="Stream the list as Server-Sent Events"),
    ns: str = NS,
    svc: Services = SVC,
):
    """The namespace's schedules; with follow=true a 'schedules' event each time the list
    changes (the console's page)."""
    if wants_stream(request, follow):
        return EventSourceResponse(_lists(svc, ns), ping=PING, sep=SEP, send_timeout=SEND_TIMEOUT)
    return await svc.db.read(lambda s: store.list_all(s, ns))


async def _lists(svc: Services, ns: str) -> AsyncIterator[ServerSentEvent]:
    """The list again after every change of a schedule (any replica's), and at least every
    ``FOLLOW_RECHECK`` seconds (a firing moves its next due times); sent only when it differs."""
    sent = None
    with svc.notifier.subscribe(topics.SCHEDULES) as woken:
        while not svc.notifier.stopped:
            woken.clear()  # before reading: no wake-up falls between the read and the wait
            schedules = await svc.db.read(lambda s: store.list_all(s, ns))
            text = json.dumps([schedule.model_dump(mode="json") for schedule in schedules])
            if text != sent:
                sent = text
                yield ServerSentEvent(text, event="schedules", sep=SEP)
            await svc.notifier.wait(woken, FOLLOW_RECHECK)


@router.get("/{name}", response_model=ScheduleInfo, responses=READ_ONE)
async def show_schedule(name: str, ns: str = NS, svc: Services = SVC):
    return await svc.db.read(lambda s: store.get(s, ns, name))


@router.patch("/{name}", response_model=ScheduleInfo, responses=CHANGE)
async def update_schedule(name: str, body: ScheduleUpdate, ns: str = NS, svc: Services = SVC):
    """Only the fields given change; a change of timing counts the next due time from now."""
    return await change(svc, lambda s: store.update(s, ns, name, body))


@router.delete("/{name}", status_code=204, response_class=Response, responses=READ_ONE)
async def delete_schedule(name: str, ns: str = NS, svc: Services = SVC):
    """Its executions stay, still naming it."""
    await change(svc, lambda s: store.delete(s, ns, name))
    return Response(status_code=204)


@router.post("/{name}/pause", response_model=ScheduleInfo, responses=READ_ONE)
async def pause_schedule(name: str, ns: str = NS, svc: Services = SVC):
    return await change(svc, lambda s: store.pause(s, ns, name))


@router.post("/{name}/resume", response_model=ScheduleInfo, responses=READ_ONE)
async def resume_schedule(name: str, ns: str = NS, svc: Services = SVC):
    """Due times passed while paused are not caught up."""
    return await change(svc, lambda s: store.resume(s, ns, name))


@router.post("/{name}/trigger", response_model=ExecutionInfo, status_code=201, responses=CHANGE)
async def trigger_schedule(name: str, ns: str = NS, svc: Services = SVC):
    """Run it now, whatever its overlap policy or pause (409 while the namespace is being deleted)."""
    execution = await svc.db.run(lambda s: store.trigger(s, ns, name, svc.policy))
    svc.metrics.schedule_fires.labels(how="trigger").inc()
    svc.dispatcher.kick()
    return execution
