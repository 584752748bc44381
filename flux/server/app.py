"""The HTTP API (FastAPI). Routes are thin: they authenticate, call a service
function inside one database transaction, and wake whoever waits on the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from flux.domain.events import ExecutionState
from flux.domain.numbers import INT64_MAX
from flux.server import executions, explain, fleet, workflows
from flux.server.broadcast import PostgresBroadcast
from flux.server.database import Database, is_sqlite, migrate, normalise_url
from flux.server.dispatch import Dispatcher
from flux.server import errors
from flux.server.errors import Unauthorized, responses
from flux.server.limits import EdgeLimits, credential_gate
from flux.server.metrics import ServerMetrics
from flux.server.notify import Notifier
from flux.server.schemas import (
    Checkpoint,
    CheckpointReply,
    ClaimReply,
    ClaimRequest,
    EventOut,
    ExecutionInfo,
    Heartbeat,
    HeartbeatReply,
    PlacementInfo,
    RegistrationReply,
    RunRequest,
    WorkerInfo,
    WorkerRegistration,
    WorkflowInfo,
    WorkflowRegistration,
)
from flux.server.settings import ServerSettings, ensure_bootstrap_token, prepare_home

#: OpenAPI error answers of each route group (every route also has the edge's 413 and 422).
PUBLIC = responses(413, 422)
READ = responses(401, 413, 422)
READ_ONE = responses(401, 404, 413, 422)
CHANGE = responses(401, 404, 409, 413, 422)
WORKER = responses(401, 403, 404, 409, 413, 422)

#: How often long polls re-check the database even without a wake-up: a safety net
#: that matters when wake-ups come from other replicas (PostgreSQL), less on SQLite.
RECHECK_SINGLE, RECHECK_REPLICAS = 5.0, 1.0


def bearer(authorization: str | None = Header(default=None)) -> str | None:
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


def create_app(settings: ServerSettings) -> FastAPI:
    prepare_home(settings)
    bootstrap_token = (settings.bootstrap_token or ensure_bootstrap_token(settings.home)).encode()
    recheck = RECHECK_SINGLE if is_sqlite(normalise_url(settings.database_url)) else RECHECK_REPLICAS

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        await asyncio.to_thread(migrate, settings.database_url)
        app.state.db = Database(settings.database_url)
        await app.state.db.run(fleet.restart_grace)
        app.state.notifier = Notifier()
        broadcast = None
        if not is_sqlite(app.state.db.url):
            broadcast = PostgresBroadcast(app.state.db.url, app.state.notifier.notify_local)
            await broadcast.start()
            app.state.notifier.remote = broadcast
        app.state.metrics = ServerMetrics()
        app.state.dispatcher = Dispatcher(
            app.state.db, app.state.notifier, settings.eviction_grace_period, app.state.metrics
        )
        loop_task = asyncio.create_task(app.state.dispatcher.run())
        try:
            yield
        finally:
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
            if broadcast is not None:
                await broadcast.close()
            app.state.db.close()

    app = FastAPI(title="Flux", version="0.1.0", lifespan=lifespan)
    api_token = settings.api_token.encode() if settings.api_token else None

    def require_client(token: str | None = Depends(bearer)) -> None:
        """With --api-token set, client calls (everything but the worker protocol) must carry it."""
        if api_token is not None and (not token or not hmac.compare_digest(token.encode(), api_token)):
            raise Unauthorized("missing or wrong API token (set FLUX_API_TOKEN)")

    CLIENT = [Depends(require_client)]
    errors.install(app)

    def db(request: Request) -> Database:
        return request.app.state.db

    def wake_worker(request: Request, name: str | None) -> None:
        if name:
            request.app.state.notifier.notify(f"worker:{name}")

    def execution_changed(request: Request, execution_id: str) -> None:
        request.app.state.notifier.notify(f"execution:{execution_id}")
        request.app.state.dispatcher.kick()

    @app.get("/health", responses=PUBLIC)
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/metrics", response_class=Response, responses=PUBLIC)
    async def metrics(request: Request) -> Response:
        snapshot = await db(request).run(ServerMetrics.snapshot)
        return Response(request.app.state.metrics.render(snapshot), media_type=CONTENT_TYPE_LATEST)

    # --- workflows ---------------------------------------------------------------------

    @app.post("/workflows", response_model=list[WorkflowInfo], status_code=201, dependencies=CLIENT, responses=READ)
    async def register_workflows(body: WorkflowRegistration, request: Request):
        fleet_views = request.app.state.dispatcher.fleet
        return await db(request).run(lambda s: workflows.register(s, body, fleet_views(s)))

    @app.get("/workflows", response_model=list[WorkflowInfo], dependencies=CLIENT, responses=READ)
    async def list_workflows(request: Request):
        return await db(request).run(workflows.list_latest)

    @app.get("/workflows/{name}", response_model=WorkflowInfo, dependencies=CLIENT, responses=READ_ONE)
    async def show_workflow(name: str, request: Request, version: int | None = Query(default=None, ge=1, le=INT64_MAX)):
        return await db(request).run(lambda s: workflows.info(workflows.get(s, name, version), with_source=True))

    @app.post("/workflows/{name}/run", response_model=ExecutionInfo, status_code=201, dependencies=CLIENT, responses=READ_ONE)
    async def run_workflow(name: str, body: RunRequest, request: Request):
        execution = await db(request).run(lambda s: executions.submit(s, name, body))
        request.app.state.dispatcher.kick()
        return execution

    # --- executions --------------------------------------------------------------------

    @app.get("/executions", response_model=list[ExecutionInfo], dependencies=CLIENT, responses=READ)
    async def list_executions(
        request: Request,
        state: str | None = None,
        workflow: str | None = None,
        limit: int = Query(default=50, ge=1, le=1000),
    ):
        return await db(request).run(lambda s: executions.list_executions(s, state, workflow, limit))

    @app.get("/executions/{execution_id}", response_model=ExecutionInfo, dependencies=CLIENT, responses=READ_ONE)
    async def show_execution(
        execution_id: str,
        request: Request,
        wait: float = Query(default=0.0, ge=0, le=300, description="Seconds to wait for a terminal state"),
    ):
        deadline = time.monotonic() + wait
        notifier = request.app.state.notifier
        while True:
            woken = notifier.listen(f"execution:{execution_id}")
            execution = await db(request).run(lambda s: executions.get(s, execution_id))
            remaining = deadline - time.monotonic()
            if ExecutionState(execution.state).is_terminal or remaining <= 0 or notifier.stopped:
                return execution
            await notifier.wait(woken, min(remaining, recheck))

    @app.get("/executions/{execution_id}/placement", response_model=PlacementInfo, dependencies=CLIENT, responses=READ_ONE)
    async def execution_placement(execution_id: str, request: Request):
        """Every worker's verdict and a Kubernetes-style summary; for a dispatched one, who won and why."""
        fleet_views = request.app.state.dispatcher.fleet
        return await db(request).run(lambda s: explain.placement(s, execution_id, fleet_views(s)))

    @app.get("/executions/{execution_id}/events", response_model=list[EventOut], dependencies=CLIENT, responses=READ_ONE)
    async def execution_events(execution_id: str, request: Request, after: int = Query(default=0, ge=0, le=INT64_MAX)):
        return await db(request).run(lambda s: executions.events(s, execution_id, after))

    @app.post("/executions/{execution_id}/cancel", response_model=ExecutionInfo, dependencies=CLIENT, responses=CHANGE)
    async def cancel_execution(execution_id: str, request: Request):
        execution, worker_name = await db(request).run(lambda s: executions.cancel(s, execution_id))
        wake_worker(request, worker_name)
        execution_changed(request, execution_id)
        return execution

    @app.post("/executions/{execution_id}/checkpoint", response_model=CheckpointReply, responses=WORKER)
    async def checkpoint(execution_id: str, body: Checkpoint, request: Request, token: str | None = Depends(bearer)):
        reply, ended = await db(request).run(
            lambda s: executions.checkpoint(s, fleet.authenticate(s, token), execution_id, body)
        )
        if ended:
            execution_changed(request, execution_id)
        return reply

    # --- workers -----------------------------------------------------------------------

    def require_bootstrap(token: str | None = Depends(bearer)) -> None:
        """Runs before the body is validated: strangers learn nothing about the schema."""
        if not token or not hmac.compare_digest(token.encode(), bootstrap_token):
            raise Unauthorized("invalid bootstrap token (see 'flux server bootstrap-token')")

    @app.post("/workers/register", response_model=RegistrationReply, dependencies=[Depends(require_bootstrap)], responses=WORKER)
    async def register_worker(body: WorkerRegistration, request: Request):
        session_token, abandon = await db(request).run(lambda s: fleet.register(s, body))
        request.app.state.dispatcher.kick()
        return RegistrationReply(session_token=session_token, abandon=abandon)

    @app.post("/workers/{name}/heartbeat", response_model=HeartbeatReply, responses=WORKER)
    async def worker_heartbeat(name: str, body: Heartbeat, request: Request, token: str | None = Depends(bearer)):
        state, cancel, requeued = await db(request).run(
            lambda s: fleet.heartbeat(s, fleet.authenticate(s, token, name), body)
        )
        if requeued:
            request.app.state.dispatcher.kick()
        # A fresh sample with more room is seen by the next periodic round (within a second).
        return HeartbeatReply(state=state, cancel=cancel)

    @app.post("/workers/{name}/claim", response_model=ClaimReply, responses=WORKER)
    async def worker_claim(name: str, body: ClaimRequest, request: Request, token: str | None = Depends(bearer)):
        deadline = time.monotonic() + body.wait
        notifier = request.app.state.notifier
        request.app.state.dispatcher.kick()
        while True:
            woken = notifier.listen(f"worker:{name}")
            if await request.is_disconnected():  # hand nothing to a poll nobody reads any more
                return ClaimReply(executions=[], cancel=[])
            claimed, cancel = await db(request).run(lambda s: executions.deliver(s, fleet.authenticate(s, token, name)))
            remaining = deadline - time.monotonic()
            if claimed or cancel or remaining <= 0 or notifier.stopped:
                return ClaimReply(executions=claimed, cancel=cancel)
            await notifier.wait(woken, min(remaining, recheck))

    @app.post("/workers/{name}/shutdown", response_model=list[str], responses=WORKER)
    async def worker_shutdown(name: str, request: Request, token: str | None = Depends(bearer)):
        """A worker leaving on purpose: its executions are requeued at once."""
        released = await db(request).run(
            lambda s: fleet.release(s, fleet.authenticate(s, token, name), f"worker {name} shut down")
        )
        request.app.state.dispatcher.kick()
        return released

    @app.post("/workers/{name}/drain", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
    async def drain_worker(name: str, request: Request):
        """No new work for this worker; it finishes what it runs, then shows DRAINED."""
        return await db(request).run(lambda s: fleet.set_draining(s, name, True))

    @app.post("/workers/{name}/undrain", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
    async def undrain_worker(name: str, request: Request):
        worker = await db(request).run(lambda s: fleet.set_draining(s, name, False))
        request.app.state.dispatcher.kick()
        return worker

    @app.get("/workers", response_model=list[WorkerInfo], dependencies=CLIENT, responses=READ)
    async def list_workers(request: Request):
        return await db(request).run(fleet.list_workers)

    @app.get("/workers/{name}", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
    async def show_worker(name: str, request: Request):
        def show(s):
            worker = fleet.get(s, name)
            return fleet.info(worker, fleet.running_counts(s).get(name, 0), with_packages=True)

        return await db(request).run(show)

    # Anonymous calls to routes behind these gates are refused before their body is read.
    gates = {require_bootstrap: "missing bootstrap token (see 'flux server bootstrap-token')",
             bearer: "missing worker session token (Authorization: Bearer ...)"}
    if api_token is not None:
        gates[require_client] = "missing API token (set FLUX_API_TOKEN)"
    app.add_middleware(
        EdgeLimits,
        max_body_size=settings.max_body_size,
        max_json_depth=settings.max_json_depth,
        credentials_needed=credential_gate(lambda: app.routes, gates),
    )
    return app
