"""The executions API: list and prune the history, show (and wait for) one, explain
its placement, cancel, resume, and a worker's checkpoints. Thin routes: authenticate,
one transaction in ``flux.server.executions``, wake whoever waits."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from flux.domain.events import ExecutionState
from flux.server import awaiting, executions, explain, paging, payloads, retention, topics
from flux.server.auth import CLIENT, worker
from flux.server.errors import CHANGE, READ, READ_ONE, WORKER
from flux.server.registry import Member
from flux.server.schemas import (
    Checkpoint,
    CheckpointReply,
    ExecutionInfo,
    PlacementInfo,
    PruneReply,
    PruneRequest,
    ResumeRequest,
)
from flux.server.scope import namespace
from flux.server.services import Services, services

SVC = Depends(services)
NS = Depends(namespace)

router = APIRouter()


@router.get(
    "/executions",
    response_model=list[ExecutionInfo],
    response_model_exclude_unset=True,
    dependencies=CLIENT,
    responses=READ,
)
async def list_executions(
    request: Request,
    response: Response,
    state: str | None = Query(
        default=None,
        description="Only executions in this state (any case)",
        json_schema_extra={"enum": [state.value for state in ExecutionState]},
    ),
    workflow: str | None = None,
    worker: str | None = Query(default=None, description="Only executions placed on this worker"),
    since: float | None = Query(default=None, description="Submitted at or after this time (Unix seconds)"),
    until: float | None = Query(default=None, description="Submitted before this time (Unix seconds)"),
    limit: int = Query(default=50, ge=1, le=1000),
    after: str | None = Query(default=None, max_length=200, description="The X-Next-Cursor of the previous page"),
    include: str | None = Query(
        default=None, max_length=64, description="input,output: payloads to carry (left out by default)"
    ),
    id_prefix: str | None = Query(
        default=None,
        min_length=1,
        max_length=32,
        pattern="^[0-9a-fA-F]+$",
        description="Executions whose id starts with this (unique-prefix lookup)",
    ),
    schedule: str | None = Query(default=None, max_length=128, description="Only the runs this schedule started"),
    members: bool = Query(
        default=False,
        description="Gang members too: left out by default, except by worker or id_prefix (docs/gangs.md)",
    ),
    ns: str = NS,
    svc: Services = SVC,
):
    """Newest first, a page at a time: the next page's cursor is in the ``X-Next-Cursor``
    header (and a ``Link: rel="next"``), absent on the last page (docs/history.md). A
    gang's members are listed under their gang (its ``GET``), not here, unless asked."""
    where = executions.ExecutionFilter(
        namespace=ns,
        state=state,
        workflow=workflow,
        worker=worker,
        schedule=schedule,
        id_prefix=id_prefix,
        since=since,
        until=until,
        members=members,
    )
    wanted = executions.parse_include(include)
    page = await svc.db.read(lambda s: executions.page(s, where, limit, after, wanted))
    paging.announce(request, response, page.next_cursor)
    return page.items


@router.post("/executions/prune", response_model=PruneReply, dependencies=CLIENT, responses=CHANGE)
async def prune_executions(body: PruneRequest, ns: str = NS, svc: Services = SVC):
    """Delete the namespace's executions that finished more than ``older_than`` seconds
    ago, with their events and log lines, in batches that let other work in (docs/history.md)."""
    return PruneReply(deleted=await retention.prune(svc.db, body.older_than, ns))


@router.get("/executions/{execution_id}", response_model=ExecutionInfo, dependencies=CLIENT, responses=READ_ONE)
async def show_execution(
    execution_id: str,
    wait: float = Query(default=0.0, ge=0, le=awaiting.MAX_WAIT, description="Seconds to wait for a terminal state"),
    ns: str = NS,
    svc: Services = SVC,
):
    return await awaiting.show(svc, execution_id, ns, wait)


@router.get(
    "/executions/{execution_id}/placement", response_model=PlacementInfo, dependencies=CLIENT, responses=READ_ONE
)
async def execution_placement(execution_id: str, ns: str = NS, svc: Services = SVC):
    """Every worker's verdict and a Kubernetes-style summary; for a dispatched one, who won and why."""
    fleet_views = svc.dispatcher.snapshot.views
    return await svc.db.run(lambda s: explain.placement(s, execution_id, fleet_views(s), ns))


@router.post("/executions/{execution_id}/cancel", response_model=ExecutionInfo, dependencies=CLIENT, responses=CHANGE)
async def cancel_execution(execution_id: str, ns: str = NS, svc: Services = SVC):
    """At once when no worker holds it (queued, asleep, paused, awaiting a child);
    otherwise its worker stops it. Its children are cancelled too."""
    execution, workers = await svc.db.run(lambda s: executions.cancel(s, execution_id, ns))
    for worker_name in set(workers):
        svc.wake_worker(worker_name)
    svc.execution_changed(execution_id)
    return execution


@router.post("/executions/{execution_id}/resume", response_model=ExecutionInfo, dependencies=CLIENT, responses=CHANGE)
async def resume_execution(execution_id: str, body: ResumeRequest, ns: str = NS, svc: Services = SVC):
    """Continue a PAUSED execution: its ``pause()`` returns ``input`` (409 unless PAUSED; docs/waits.md)."""
    payloads.check_input(body.input, svc.settings.max_payload_size)
    execution = await svc.db.run(lambda s: executions.resume(s, execution_id, body.input, ns))
    svc.execution_changed(execution_id)
    return execution


@router.post("/executions/{execution_id}/checkpoint", response_model=CheckpointReply, responses=WORKER)
async def checkpoint(execution_id: str, body: Checkpoint, member: Member = Depends(worker), svc: Services = SVC):
    reply, ended = await svc.db.run(lambda s: executions.checkpoint(s, member.name, execution_id, body, svc.policy))
    svc.metrics.count_task_events(body.events)
    if ended is executions.Ended.NOTHING:
        svc.notifier.notify(topics.events(execution_id))  # whoever follows its events (log_routes)
    else:
        svc.execution_changed(execution_id, queued=ended is executions.Ended.ATTEMPT)
    return reply
