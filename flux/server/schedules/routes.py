"""The routes of schedules (``/schedules``, docs/schedules.md): thin, like every route:
one transaction, then wake the firing loop (here and on other replicas) or dispatch."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from flux.domain.attempts import AttemptPolicy
from flux.server.errors import responses
from flux.server.schedules import store
from flux.server.schedules.loop import WAKE
from flux.server.schedules.schemas import ScheduleCreate, ScheduleInfo, ScheduleUpdate
from flux.server.schemas import ExecutionInfo

READ = responses(401, 413, 422)
READ_ONE = responses(401, 404, 413, 422)
CHANGE = responses(401, 404, 409, 413, 422)


def router(dependencies: list, policy: AttemptPolicy) -> APIRouter:
    api = APIRouter(prefix="/schedules", tags=["schedules"], dependencies=dependencies)

    async def change(request: Request, fn):  # noqa: ANN001, ANN202 - a store function of a Session
        result = await request.app.state.db.run(fn)
        request.app.state.notifier.notify(WAKE)
        return result

    @api.post("", response_model=ScheduleInfo, status_code=201, responses=CHANGE)
    async def create_schedule(body: ScheduleCreate, request: Request):
        """A workflow on cron, every interval, or once at a time; 422 (nothing stored) for a bad one."""
        return await change(request, lambda s: store.create(s, body))

    @api.get("", response_model=list[ScheduleInfo], responses=READ)
    async def list_schedules(request: Request):
        return await request.app.state.db.read(store.list_all)

    @api.get("/{name}", response_model=ScheduleInfo, responses=READ_ONE)
    async def show_schedule(name: str, request: Request):
        return await request.app.state.db.read(lambda s: store.get(s, name))

    @api.patch("/{name}", response_model=ScheduleInfo, responses=CHANGE)
    async def update_schedule(name: str, body: ScheduleUpdate, request: Request):
        """Only the fields given change; a change of timing counts the next due time from now."""
        return await change(request, lambda s: store.update(s, name, body))

    @api.delete("/{name}", status_code=204, response_class=Response, responses=READ_ONE)
    async def delete_schedule(name: str, request: Request):
        """Its executions stay, still naming it."""
        await change(request, lambda s: store.delete(s, name))
        return Response(status_code=204)

    @api.post("/{name}/pause", response_model=ScheduleInfo, responses=READ_ONE)
    async def pause_schedule(name: str, request: Request):
        return await change(request, lambda s: store.pause(s, name))

    @api.post("/{name}/resume", response_model=ScheduleInfo, responses=READ_ONE)
    async def resume_schedule(name: str, request: Request):
        """Due times passed while paused are not caught up."""
        return await change(request, lambda s: store.resume(s, name))

    @api.post("/{name}/trigger", response_model=ExecutionInfo, status_code=201, responses=READ_ONE)
    async def trigger_schedule(name: str, request: Request):
        """Run it now, whatever its overlap policy or pause."""
        execution = await request.app.state.db.run(lambda s: store.trigger(s, name, policy))
        request.app.state.metrics.schedule_fires.labels(how="trigger").inc()
        request.app.state.dispatcher.kick()
        return execution

    return api
