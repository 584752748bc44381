"""``/workflows``: register, list, show and run workflows; and ``/health`` and
``/metrics``. Thin: one transaction in ``flux.server.workflows`` or
``flux.server.executions``, then dispatch looks for room."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from flux.domain.numbers import INT64_MAX
from flux.server import awaiting, paging, payloads, workflows
from flux.server.auth import CLIENT
from flux.server.errors import CHANGE, PUBLIC, READ, READ_ONE, responses
from flux.server.metrics import ServerMetrics
from flux.server.schemas import ExecutionInfo, RunRequest, WorkflowInfo, WorkflowRegistration
from flux.server.scope import namespace
from flux.server.services import Services, services
from flux.server.workers.draining import liveness

router = APIRouter()


@router.get("/health", responses=PUBLIC)
async def health() -> dict:
    return {"status": "ok"}


@router.get("/metrics", response_class=Response, responses=PUBLIC)
async def metrics(svc: Services = Depends(services)) -> Response:
    known = liveness(svc)
    snapshot = await svc.db.read(lambda s: ServerMetrics.snapshot(s, known), counted=False)
    svc.metrics.waiting.set(svc.notifier.waiting())
    return Response(svc.metrics.render(snapshot), media_type=CONTENT_TYPE_LATEST)


NS = Depends(namespace)


@router.post(
    "/workflows",
    response_model=list[WorkflowInfo],
    status_code=201,
    dependencies=CLIENT,
    responses=responses(401, 409, 413, 422),
)
async def register_workflows(body: WorkflowRegistration, ns: str = NS, svc: Services = Depends(services)):
    fleet_views = svc.dispatcher.snapshot.views
    registered = await svc.db.run(
        lambda s: workflows.register_source(s, ns, body, fleet_views(s), svc.policy.max_gang_size)
    )
    svc.dispatcher.kick()  # what waited on an older version may fit now
    return registered


@router.get("/workflows", response_model=list[WorkflowInfo], dependencies=CLIENT, responses=READ)
async def list_workflows(
    request: Request,
    response: Response,
    limit: int = paging.PAGE_LIMIT,
    after: str | None = paging.AFTER_NAME,
    ns: str = NS,
    svc: Services = Depends(services),
):
    """The newest version of each workflow, by name, a page at a time (``X-Next-Cursor``)."""
    rows = await svc.db.read(lambda s: workflows.list_latest(s, ns, limit + 1, after))
    return paging.by_name(request, response, rows, limit)


@router.get("/workflows/{name}/versions", response_model=list[WorkflowInfo], dependencies=CLIENT, responses=READ_ONE)
async def workflow_versions(name: str, ns: str = NS, svc: Services = Depends(services)):
    """Every version of a workflow, oldest first; each stays runnable (``"version": N`` in a run)."""
    return await svc.db.read(lambda s: workflows.versions(s, ns, name))


@router.get("/workflows/{name}", response_model=WorkflowInfo, dependencies=CLIENT, responses=READ_ONE)
async def show_workflow(
    name: str,
    version: int | None = Query(default=None, ge=1, le=INT64_MAX),
    ns: str = NS,
    svc: Services = Depends(services),
):
    return await svc.db.read(lambda s: workflows.info(workflows.get(s, ns, name, version), with_source=True))


@router.post(
    "/workflows/{name}/run", response_model=ExecutionInfo, status_code=201, dependencies=CLIENT, responses=CHANGE
)
async def run_workflow(
    name: str,
    body: RunRequest,
    wait: float = Query(
        default=0.0,
        ge=0,
        le=awaiting.MAX_WAIT,
        description="Seconds to wait for it to end before answering (docs/client.md#waiting-for-the-end)",
    ),
    ns: str = NS,
    svc: Services = Depends(services),
):
    """201 with the execution as it is once ``wait`` is over (at once without it). 409
    while the namespace is being deleted (checked with the workflow, in one read)."""
    payloads.check_input(body.input, svc.settings.max_payload_size)
    return await awaiting.run(svc, ns, name, body, wait)
