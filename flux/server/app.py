"""The HTTP API (FastAPI). Routes are thin: they authenticate, call a service
function inside one database transaction, and wake whoever waits on the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import logging
import os
import secrets
import sys
import time

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from flux import tracing
from flux.domain.attempts import AttemptEnd
from flux.domain.numbers import INT64_MAX
from flux.domain.samples import metrics_changed, resources_changed
from flux.server import bundle_routes, console, execution_routes, executions, fleet, log_routes, paging, payloads, retention, schedules, watch, workflows
from flux.server import cache_routes, secret_routes, secrets as secret_store
from flux.logformat import LOG_FORMAT_ENV, RequestContext, configure_logging
from flux.server.broadcast import PostgresBroadcast
from flux.server.database import Database, is_sqlite
from flux.server.dispatch import Dispatcher
from flux.server import errors
from flux.server.errors import PUBLIC, READ, READ_ONE, WORKER, Forbidden, Unauthorized
from flux.server.limits import EdgeLimits, credential_gate
from flux.server.liveness import LivenessKeeper
from flux.server.metrics import ServerMetrics
from flux.server.notify import Notifier
from flux.server.registry import CLAIM_RECHECK, FleetRegistry, Member
from flux.server.shedding import LoadShedding
from flux.server.timers import Timers
from flux.server.serve import long_polls_end_on_stop
from flux.server.schemas import (
    ClaimReply,
    ClaimRequest,
    ExecutionInfo,
    Heartbeat,
    HeartbeatReply,
    RegistrationReply,
    RunRequest,
    WorkerInfo,
    WorkerRegistration,
    WorkflowInfo,
    WorkflowRegistration,
)
from flux.server.settings import SETTINGS_ENV, ServerSettings, ensure_bootstrap_token, prepare_home


log = logging.getLogger("flux.server")
#: Lists ordered by name (workers, workflows): a page, and the name to start after.
PAGE_LIMIT = Query(default=1000, ge=1, le=5000, description="Items in the page")
AFTER_NAME = Query(default=None, max_length=255, description="The X-Next-Cursor of the previous page")
#: The GIL hand-over interval of a server process. Database work runs on threads
#: beside the event loop; with CPython's default 5 ms, a loop kept busy by a thousand
#: workers' heartbeats made each transaction wait up to 5 ms for the GIL (B7 at 1,000
#: workers on SQLite: submit->claimed p50 7.7 -> 6.1 ms, heartbeat p99 105 -> 34 ms).
SWITCH_INTERVAL = 0.001

async def bearer(authorization: str | None = Header(default=None)) -> str | None:
    """Dependencies are ``async``: FastAPI runs a plain ``def`` one on a thread pool,
    which cost a thread hand-off on every worker request."""
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


def create_app(settings: ServerSettings) -> FastAPI:
    prepare_home(settings)
    bootstrap_token = (settings.bootstrap_token or ensure_bootstrap_token(settings.home)).encode()
    shedding = LoadShedding(settings.shed_after)
    policy = settings.attempt_policy()
    secrets_keys = secret_store.keyring(settings.secrets_key_file)  # None: no secrets key (docs/tasks.md#secrets)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        sys.setswitchinterval(SWITCH_INTERVAL)
        tracing.setup("flux-server")  # a no-op unless tracing is configured (docs/tracing.md)
        if not settings.migrated:
            from flux.server.database import migrate

            await asyncio.to_thread(migrate, settings.database_url)
        state = app.state
        state.db = Database(settings.database_url)
        await state.db.read(lambda s: secret_store.check_key(s, secrets_keys))  # stored secrets need their key
        shared = not is_sqlite(state.db.url)
        state.registry = FleetRegistry(shared=shared, lease_interval=settings.lease_interval_for(shared))
        state.registry.sync(await state.db.read(fleet.leases))  # known workers; their silence counts from now
        state.notifier = Notifier()
        state.notifier.hooks.append(state.registry.on_notify)
        state.notifier.hooks.append(watch.relay(state.notifier))  # GET /watch/executions
        broadcast = None
        if shared:
            broadcast = PostgresBroadcast(state.db.url, state.notifier.notify_local)
            await broadcast.start()
            state.notifier.remote = broadcast
        state.metrics = ServerMetrics(state.db.statements)
        state.dispatcher = Dispatcher(state.db, state.notifier, state.registry, state.metrics)
        keeper = LivenessKeeper(
            state.db, state.registry, state.notifier, state.metrics, settings.eviction_grace_period, state.dispatcher.kick, policy
        )
        shedding.watch(state.db, state.metrics)
        firing = schedules.ScheduleLoop(state.db, state.notifier, state.metrics, state.dispatcher.kick, policy, shared)
        timers = Timers(state.db, state.notifier, state.dispatcher.kick, shared=shared)  # due sleeps, timeouts (docs/waits.md)
        loops = [asyncio.create_task(state.dispatcher.run()), asyncio.create_task(keeper.run()), asyncio.create_task(firing.run()),
                 asyncio.create_task(timers.run())]
        if settings.retention:
            loops.append(asyncio.create_task(retention.keep(state.db, settings.retention)))
        # What it took to start (modules, the app, its models, the schema) lives as long
        # as the process: out of the collector's sight, so that the collections a busy
        # server keeps triggering no longer walk it (py-spy at 1,000 idle workers: the
        # collector's share of samples fell from 7.2 % to 5.7 %).
        gc.collect()
        gc.freeze()
        try:
            with long_polls_end_on_stop(state.notifier.stop):
                yield
        finally:
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            with contextlib.suppress(Exception):
                await keeper.flush()  # a restarted server then shows when each worker was last heard
            if broadcast is not None:
                await broadcast.close()
            state.db.close()
            tracing.flush()
            gc.unfreeze()  # a process that runs several apps (tests) lets the collector see them again

    app = FastAPI(title="Flux", version="0.1.0", lifespan=lifespan)
    app.add_middleware(shedding.middleware)
    api_token = settings.api_token.encode() if settings.api_token else None

    async def require_client(token: str | None = Depends(bearer)) -> None:
        """With --api-token set, client calls (everything but the worker protocol) must carry it."""
        if api_token is not None and (not token or not hmac.compare_digest(token.encode(), api_token)):
            raise Unauthorized("missing or wrong API token (set FLUX_API_TOKEN)")

    CLIENT = [Depends(require_client)]
    errors.install(app)

    def db(request: Request) -> Database:
        return request.app.state.db

    def liveness_of(request: Request):
        """name -> (ONLINE or STALE, last heard, draining itself) as this process's registry knows it."""
        registry: FleetRegistry = request.app.state.registry

        def of(name: str) -> tuple[str, float, bool] | None:
            member = registry.members.get(name)
            if member is None:
                return None
            return registry.liveness(member, time.time()), member.last_seen, member.leaving

        return of

    @app.get("/health", responses=PUBLIC)
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/metrics", response_class=Response, responses=PUBLIC)
    async def metrics(request: Request) -> Response:
        liveness = liveness_of(request)
        snapshot = await db(request).read(lambda s: ServerMetrics.snapshot(s, liveness), counted=False)
        request.app.state.metrics.waiting.set(request.app.state.notifier.waiting())
        return Response(request.app.state.metrics.render(snapshot), media_type=CONTENT_TYPE_LATEST)

    # --- workflows ---------------------------------------------------------------------

    @app.post("/workflows", response_model=list[WorkflowInfo], status_code=201, dependencies=CLIENT, responses=READ)
    async def register_workflows(body: WorkflowRegistration, request: Request):
        fleet_views = request.app.state.dispatcher.snapshot.views
        registered = await db(request).run(lambda s: workflows.register(s, body, fleet_views(s)))
        request.app.state.dispatcher.kick()  # what waited on an older version may fit now
        return registered

    @app.get("/workflows", response_model=list[WorkflowInfo], dependencies=CLIENT, responses=READ)
    async def list_workflows(request: Request, response: Response, limit: int = PAGE_LIMIT, after: str | None = AFTER_NAME):
        """The newest version of each workflow, by name, a page at a time (``X-Next-Cursor``)."""
        rows = await db(request).read(lambda s: workflows.list_latest(s, limit + 1, after))
        page, cursor = paging.split(rows, limit, lambda row: row.name)
        paging.announce(request, response, cursor)
        return page

    @app.get("/workflows/{name}/versions", response_model=list[WorkflowInfo], dependencies=CLIENT, responses=READ_ONE)
    async def workflow_versions(name: str, request: Request):
        """Every version of a workflow, oldest first; each stays runnable (``"version": N`` in a run)."""
        return await db(request).read(lambda s: workflows.versions(s, name))

    @app.get("/workflows/{name}", response_model=WorkflowInfo, dependencies=CLIENT, responses=READ_ONE)
    async def show_workflow(name: str, request: Request, version: int | None = Query(default=None, ge=1, le=INT64_MAX)):
        return await db(request).read(lambda s: workflows.info(workflows.get(s, name, version), with_source=True))

    @app.post("/workflows/{name}/run", response_model=ExecutionInfo, status_code=201, dependencies=CLIENT, responses=READ_ONE)
    async def run_workflow(name: str, body: RunRequest, request: Request):
        payloads.check_input(body.input, settings.max_payload_size)
        execution = await db(request).run(lambda s: executions.submit(s, name, body, policy))
        request.app.state.notifier.notify(f"execution:{execution.id}")  # whoever watches the list
        request.app.state.dispatcher.kick()
        return execution

    # --- executions --------------------------------------------------------------------

    # --- workers -----------------------------------------------------------------------

    async def require_bootstrap(token: str | None = Depends(bearer)) -> None:
        """Runs before the body is validated: strangers learn nothing about the schema."""
        if not token or not hmac.compare_digest(token.encode(), bootstrap_token):
            raise Unauthorized("invalid bootstrap token (see 'flux server bootstrap-token')")

    async def authenticate_worker(request: Request, token: str | None, name: str | None = None) -> Member:
        """The worker that owns this session token, from memory; the database only on a miss."""
        if not token:
            raise Unauthorized("missing worker session token (Authorization: Bearer ...)")
        registry: FleetRegistry = request.app.state.registry
        token_hash = fleet.hash_token(token)
        member = registry.by_token(token_hash)
        if member is None:
            now = time.time()
            if not registry.known_bad(token_hash, now):
                member = await db(request).read(lambda s: fleet.member_for_token(s, token_hash))
            if member is None:
                registry.remember_bad(token_hash, now)
                raise Unauthorized("invalid or revoked worker session token; register again")
            member = registry.admit(member)
        if name is not None and member.name != name:
            raise Forbidden(f"this session belongs to worker {member.name!r}, not {name!r}")
        return member

    @app.post("/workers/register", response_model=RegistrationReply, dependencies=[Depends(require_bootstrap)], responses=WORKER)
    async def register_worker(
        body: WorkerRegistration,
        request: Request,
        worker_token: str | None = Header(default=None, alias="X-Flux-Worker-Token",
                                          description="The session token this worker's name is bound to (a restart)"),
    ):
        token = secrets.token_urlsafe(32)
        # Its first claim reads the database only if told of work (``Member.work_hint``):
        # a round may place work on it between the commit and ``admit``; listen from now.
        with request.app.state.notifier.subscribe(f"worker:{body.name}") as placed_meanwhile:
            member, abandon = await db(request).run(lambda s: fleet.register(s, body, token, worker_token, policy))
            member.work_hint = placed_meanwhile.is_set()
        request.app.state.registry.admit(member)
        request.app.state.notifier.notify(f"auth:{member.name}:{member.token_hash[:16]}")
        request.app.state.dispatcher.kick()
        return RegistrationReply(session_token=token, abandon=abandon)

    @app.post("/workers/{name}/heartbeat", response_model=HeartbeatReply, responses=WORKER)
    async def worker_heartbeat(name: str, body: Heartbeat, request: Request, token: str | None = Depends(bearer)):
        """Liveness in memory; the database only for a sample that moved or a change in what it holds."""
        state = request.app.state
        registry: FleetRegistry = state.registry
        member = await authenticate_worker(request, token, name)
        now = time.time()
        registry.beat(member, now)
        state.metrics.heartbeats.inc()
        sample = body.resources.model_dump() if body.resources is not None else None
        resources = body.resources if sample is not None and resources_changed(member.sample, sample) else None
        published = body.metrics if body.metrics is not None and metrics_changed(member.metrics, body.metrics) else None
        if resources is not None or published is not None:
            await db(request).run(lambda s: fleet.store_status(s, member.id, resources, published))
            member.sample = sample if resources is not None else member.sample
            member.metrics = dict(published) if published is not None else member.metrics
            state.metrics.status_writes.inc()
            state.notifier.notify(f"status:{name}")  # every replica's dispatcher re-reads it
            state.dispatcher.kick()  # more room, or less, for what waits
        if body.draining and not member.leaving:
            await leaving(request, member)
        reported = set(body.running)
        if registry.needs_reconcile(member, reported, now, fleet.settle_time(member.heartbeat_interval)):
            member.held, member.draining, requeued = await db(request).run(lambda s: fleet.reconcile(s, member, reported, policy))
            if requeued:
                state.dispatcher.kick()
        running = len(member.held or ())
        shown = fleet.display_state(registry.liveness(member, now), member.draining or member.leaving, running)
        return HeartbeatReply(state=shown, cancel=member.cancelling(), abandon=member.foreign(body.running))

    async def leaving(request: Request, member: Member) -> None:
        """A worker draining itself to stop: place nothing more on it, and hand back at
        once what it was given but has not received."""
        member.leaving = True
        request.app.state.registry.fleet_changed()
        handed_back = await db(request).run(lambda s: fleet.hand_back_undelivered(s, member.name, policy))
        member.held = None  # re-read on its next heartbeat or claim
        for execution_id in handed_back:
            request.app.state.notifier.notify(f"execution:{execution_id}")
        request.app.state.dispatcher.kick()

    @app.post("/workers/{name}/claim", response_model=ClaimReply, responses=WORKER)
    async def worker_claim(name: str, body: ClaimRequest, request: Request, token: str | None = Depends(bearer)):
        """A long poll that reads the database only when told there may be work (or,
        as a safety net, once every ``CLAIM_RECHECK`` seconds)."""
        state = request.app.state
        registry: FleetRegistry = state.registry
        member = await authenticate_worker(request, token, name)
        deadline = time.monotonic() + body.wait
        empty = ClaimReply(executions=[], cancel=[])
        with state.notifier.subscribe(f"worker:{name}") as woken:
            while True:
                woken.clear()
                if registry.members.get(name) is not member or member.leaving:
                    return empty  # re-registered, evicted or stopping meanwhile
                if await request.is_disconnected():  # hand nothing to a poll nobody reads any more
                    return empty
                now = time.time()
                if registry.claim_should_check(member, now):
                    member.work_hint, member.last_claim_check = False, now
                    claimed, cancel, held = await db(request).run(lambda s: executions.deliver(s, name))
                    for job in claimed:
                        job.max_payload_size = settings.max_payload_size
                        job.max_json_depth = settings.max_json_depth
                    member.held = fleet.held_map(held)
                    if claimed or cancel:
                        return ClaimReply(executions=claimed, cancel=cancel)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or state.notifier.stopped:
                    return empty
                await state.notifier.wait(woken, min(remaining, CLAIM_RECHECK))

    @app.post("/workers/{name}/shutdown", response_model=list[str], responses=WORKER)
    async def worker_shutdown(name: str, request: Request, token: str | None = Depends(bearer)):
        """A worker leaving on purpose: its executions are requeued at once."""
        await authenticate_worker(request, token, name)
        cause = f"worker {name} shut down"
        released = await db(request).run(lambda s: fleet.release(s, name, AttemptEnd.HANDED_BACK, cause, policy))
        request.app.state.registry.forget(name)
        request.app.state.notifier.notify(f"auth:{name}:-")
        for execution_id in released:
            request.app.state.notifier.notify(f"execution:{execution_id}")
        request.app.state.dispatcher.kick()
        return released

    async def set_draining(request: Request, name: str, draining: bool) -> WorkerInfo:
        liveness = liveness_of(request)(name)
        worker = await db(request).run(lambda s: fleet.set_draining(s, name, draining, liveness))
        member = request.app.state.registry.members.get(name)
        if member is not None:
            member.draining = draining
        execution_routes.wake_worker(request, name)  # other replicas refresh what they know of it
        request.app.state.notifier.notify(f"status:{name}")
        request.app.state.dispatcher.kick()
        return worker

    @app.post("/workers/{name}/drain", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
    async def drain_worker(name: str, request: Request):
        """No new work for this worker; it finishes what it runs, then shows DRAINED."""
        return await set_draining(request, name, True)

    @app.post("/workers/{name}/undrain", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
    async def undrain_worker(name: str, request: Request):
        return await set_draining(request, name, False)

    @app.get("/workers", response_model=list[WorkerInfo], dependencies=CLIENT, responses=READ)
    async def list_workers(request: Request, response: Response, limit: int = PAGE_LIMIT, after: str | None = AFTER_NAME):
        """Workers by name, a page at a time (``X-Next-Cursor``)."""
        liveness = liveness_of(request)
        rows = await db(request).read(lambda s: fleet.list_workers(s, liveness, limit + 1, after))
        page, cursor = paging.split(rows, limit, lambda row: row.name)
        paging.announce(request, response, cursor)
        return page

    @app.get("/workers/{name}", response_model=WorkerInfo, dependencies=CLIENT, responses=READ_ONE)
    async def show_worker(name: str, request: Request):
        liveness = liveness_of(request)(name)
        return await db(request).read(lambda s: fleet.show(s, name, liveness))

    # An execution's output and events: pages, and SSE streams that follow them.
    app.include_router(execution_routes.router(CLIENT, bearer, authenticate_worker, settings, policy))
    app.include_router(log_routes.router(CLIENT, bearer, authenticate_worker))
    app.include_router(watch.router(CLIENT))  # execution state changes, as SSE
    app.include_router(console.router(login=api_token is not None, key=bootstrap_token))  # the web console (docs/console.md)
    # Bundles: upload, a worker's fetch by hash, and registering one's workflows (docs/bundles.md).
    app.include_router(bundle_routes.router(CLIENT, bearer, authenticate_worker, settings))
    app.include_router(schedules.router(CLIENT, policy))  # workflows on cron, interval or once (docs/schedules.md)
    app.include_router(cache_routes.router(CLIENT, bearer, authenticate_worker))  # the task cache (docs/tasks.md#cache)
    app.include_router(secret_routes.router(CLIENT, bearer, authenticate_worker, secrets_keys))  # docs/tasks.md#secrets

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
    app.add_middleware(RequestContext)  # outermost: every line logged for a request carries its id
    return app


def app_from_environment() -> FastAPI:
    """For ``flux start server --processes N``: each process builds its app from the
    settings its parent left in the environment."""
    configure_logging(os.environ.get(LOG_FORMAT_ENV, "text"))
    return create_app(ServerSettings.from_json(os.environ[SETTINGS_ENV]))
