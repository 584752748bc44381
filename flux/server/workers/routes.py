"""``/workers``: the worker protocol (register, heartbeat, claim, shutdown) and what
clients see and do to the fleet (list, show, drain, undrain). Thin: authenticate,
call one service function of this package."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response

from flux.server import paging
from flux.server.auth import CLIENT, named_worker, require_bootstrap
from flux.server.errors import READ, READ_ONE, WORKER
from flux.server.fleet_trend import FleetHistory, FleetSummary
from flux.server.log_routes import wants_stream
from flux.server.registry import Member
from flux.server.schemas import (
    ClaimReply,
    ClaimRequest,
    Heartbeat,
    HeartbeatReply,
    RegistrationReply,
    WorkerInfo,
    WorkerRegistration,
)
from flux.server.services import Services, services
from flux.server.workers import claim, draining, heartbeat, leaving, registration, summary

router = APIRouter()
HELD_TOKEN = Header(
    default=None,
    alias="X-Flux-Worker-Token",
    description="The session token this worker's name is bound to (a restart)",
)


@router.post(
    "/workers/register", response_model=RegistrationReply, dependencies=[Depends(require_bootstrap)], responses=WORKER
)
async def register_worker(
    body: WorkerRegistration, worker_token: str | None = HELD_TOKEN, svc: Services = Depends(services)
):
    return await registration.register_worker(svc, body, worker_token)


@router.post("/workers/{name}/heartbeat", response_model=HeartbeatReply, responses=WORKER)
async def worker_heartbeat(
    name: str, body: Heartbeat, member: Member = Depends(named_worker), svc: Services = Depends(services)
):
    """Liveness in memory; the database only for a sample that moved or a change in what it holds."""
    return await heartbeat.heartbeat(svc, member, body)


@router.post("/workers/{name}/claim", response_model=ClaimReply, responses=WORKER)
async def worker_claim(
    name: str,
    body: ClaimRequest,
    request: Request,
    member: Member = Depends(named_worker),
    svc: Services = Depends(services),
):
    """A long poll that reads the database only when told there may be work (or,
    as a safety net, once every ``CLAIM_RECHECK`` seconds)."""
    return await claim.claim(svc, member, body, request.is_disconnected, request.receive)


@router.post("/workers/{name}/shutdown", response_model=list[str], responses=WORKER)
async def worker_shutdown(name: str, member: Member = Depends(named_worker), svc: Services = Depends(services)):
    """A worker leaving on purpose: its executions are requeued at once."""
    return await leaving.shutdown(svc, member.name)


@router.post("/workers/{name}/drain", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
async def drain_worker(name: str, svc: Services = Depends(services)):
    """No new work for this worker; it finishes what it runs, then shows DRAINED."""
    return await draining.set_draining(svc, name, True)


@router.post("/workers/{name}/undrain", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
async def undrain_worker(name: str, svc: Services = Depends(services)):
    return await draining.set_draining(svc, name, False)


@router.get("/workers", response_model=list[WorkerInfo], dependencies=CLIENT, responses=READ)
async def list_workers(
    request: Request,
    response: Response,
    limit: int = paging.PAGE_LIMIT,
    after: str | None = paging.AFTER_NAME,
    svc: Services = Depends(services),
):
    """Workers by name, a page at a time (``X-Next-Cursor``)."""
    return paging.by_name(request, response, await draining.page(svc, limit + 1, after), limit)


@router.get("/fleet", response_model=FleetSummary, dependencies=CLIENT, responses=READ)
async def fleet_summary(
    request: Request,
    follow: bool = Query(default=False, description="Stream it as Server-Sent Events ('fleet' events)"),
    svc: Services = Depends(services),
):
    """Workers by state, slots in use, the queue and what waits (docs/fleet.md); live with follow=true."""
    if wants_stream(request, follow):
        return summary.stream(svc)
    return await svc.db.read(summary.read(svc))


@router.get("/fleet/history", response_model=FleetHistory, dependencies=CLIENT, responses=READ)
async def fleet_history(svc: Services = Depends(services)):
    """The fleet's summary every 15 s over the last 4 hours, as this replica sampled it (docs/fleet.md)."""
    return svc.trend.history()


@router.get("/workers/{name}", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
async def show_worker(name: str, svc: Services = Depends(services)):
    return await draining.show(svc, name)
