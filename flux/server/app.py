"""The HTTP API (FastAPI). Routes are thin: they authenticate (``flux.server.auth``),
call a service function inside one database transaction, and wake whoever waits on
the outcome; what they need comes as one typed ``Services`` (``flux.server.services``).
This module only wires the app: settings into services, routers, middleware."""

from __future__ import annotations

import os

from fastapi import FastAPI

from flux.logformat import LOG_FORMAT_ENV, RequestContext, configure_logging
from flux.server import (
    access,
    access_routes,
    auth,
    bundle_routes,
    cache_routes,
    console,
    errors,
    execution_routes,
    gang_routes,
    log_routes,
    namespace_routes,
    pool_routes,
    schedules,
    scope,
    secret_routes,
    watch,
    workflow_routes,
)
from flux.server import secrets as secret_store
from flux.server.audit import AuditMiddleware, AuditSource
from flux.server.hooks import routes as hook_routes
from flux.server.request_limits import EdgeLimits, credential_gate, flattened
from flux.server.services import Services, install
from flux.server.settings import SETTINGS_ENV, ServerSettings, ensure_bootstrap_token, prepare_home
from flux.server.shedding import LoadShedding
from flux.server.startup import lifespan
from flux.server.workers import routes as worker_routes

#: In the order they match: workflows (and /health, /metrics), workers, executions and
#: their output, the watch stream, the console (docs/console.md), bundles
#: (docs/bundles.md), schedules (docs/schedules.md), the task cache and secrets (docs/tasks.md),
#: namespaces (docs/namespaces.md), tokens and the audit log (docs/security.md#roles), webhooks
#: (docs/hooks.md), worker pools (docs/autoscaling.md). Routes that take a namespace are
#: mounted under /namespaces/{namespace} and, for 'default', without that prefix (``scope``).
#: FastAPI's own OpenTelemetry (0.142+) stays off: Flux's spans are those docs/tracing.md
#: lists (a span for every heartbeat and long poll would bury them), and its check of the
#: global providers cost every request ~5 % of the event loop's time (docs/latency.md).
NO_FASTAPI_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}
ROUTERS = (
    workflow_routes.router,
    worker_routes.router,
    execution_routes.router,
    gang_routes.router,
    log_routes.router,
    watch.router,
)
LATER_ROUTERS = (
    bundle_routes.router,
    schedules.router,
    cache_routes.router,
    secret_routes.router,
    namespace_routes.router,
    access_routes.router,
    hook_routes.router,
    pool_routes.router,
)


def create_app(settings: ServerSettings) -> FastAPI:
    prepare_home(settings)
    svc = Services(
        settings=settings,
        policy=settings.attempt_policy(),
        secrets_keys=secret_store.keyring(settings.secrets_key_file),  # None: no secrets key (docs/tasks.md#secrets)
        bootstrap_token=(settings.bootstrap_token or ensure_bootstrap_token(settings.home)).encode(),
        api_token=settings.api_token.encode() if settings.api_token else None,
    )
    shedding = LoadShedding(settings.shed_after)
    app = FastAPI(title="Flux", version="0.1.0", lifespan=lifespan(svc, shedding), telemetry=NO_FASTAPI_TELEMETRY)
    install(app, svc)
    app.add_middleware(shedding.middleware)
    errors.install(app)
    for router in ROUTERS:
        scope.include(app, router)
    app.include_router(console.router)  # its login and CSRF key come from Services (console.base.visit)
    for router in LATER_ROUTERS:
        scope.include(app, router)
    # Anonymous calls to routes behind these gates are refused before their body is read.
    app.add_middleware(
        EdgeLimits,
        max_body_size=settings.max_body_size,
        max_json_depth=settings.max_json_depth,
        credentials_needed=credential_gate(lambda: app.routes, auth.gates(svc.api_token is not None)),
    )
    _guard(app, svc)
    app.add_middleware(RequestContext)  # outermost: every line logged for a request carries its id
    return app


def _guard(app: FastAPI, svc: Services) -> None:
    """Every client route has an action (or the app is not built), its OpenAPI lists the
    refusals, and its mutating calls are audited, those refused at the edge too."""
    client_routes = access.client_routes(flattened(app.routes), auth.is_client)
    access.check_routes(client_routes)
    openapi = app.openapi
    app.openapi = lambda: app.openapi_schema or access.document(openapi(), client_routes)
    known = lambda headers: auth.known(auth.bearer_of(headers.get("authorization")), svc)  # noqa: E731
    app.add_middleware(AuditMiddleware, source=AuditSource(svc.audit, lambda: client_routes, known))


def app_from_environment() -> FastAPI:
    """For ``flux start server --processes N``: each process builds its app from the
    settings its parent left in the environment."""
    configure_logging(os.environ.get(LOG_FORMAT_ENV, "text"))
    return create_app(ServerSettings.from_json(os.environ[SETTINGS_ENV]))
