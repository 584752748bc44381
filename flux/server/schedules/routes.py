"""The routes of schedules (``/schedules``, docs/schedules.md): thin, like every route:
one transaction, then wake the firing loop (here and on other replicas) or dispatch."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from flux.server.auth import CLIENT
from flux.server import topics
from flux.server.errors import responses
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
async def list_schedules(ns: str = NS, svc: Services = SVC):
    return await svc.db.read(lambda s: store.list_all(s, ns))


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

