"""What routes need, in one typed object: the database, the notifier, dispatch, the
fleet in memory, client tokens, the audit trail, the namespaces, metrics and settings.
Routes reach it as a FastAPI dependency (``svc: Services = Depends(services)``); this
module alone knows it lives on ``app.state``, so no route reaches into the app for an untyped attribute."""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.fernet import MultiFernet
from fastapi import FastAPI, Request

from flux.domain.policy import ExecutionPolicy
from flux.server import topics
from flux.server.audit import AuditTrail
from flux.server.database import Database
from flux.server.dispatch import Dispatcher
from flux.server.fleet_trend import FleetTrend
from flux.server.metrics import ServerMetrics
from flux.server.namespaces import NamespaceCache
from flux.server.notify import Notifier
from flux.server.outbox import Subscriptions
from flux.server.registry import FleetRegistry
from flux.server.settings import ServerSettings
from flux.server.tokens import TokenCache


@dataclass
class Services:
    """Built with the app; what needs a running event loop is set when it starts (``flux.server.startup``)."""

    settings: ServerSettings
    policy: ExecutionPolicy
    #: The secrets store's keys; None: no secrets key (docs/tasks.md#secrets).
    secrets_keys: MultiFernet | None
    bootstrap_token: bytes
    #: With --api-token, every client call must carry it or another token (``tokens``).
    api_token: bytes | None
    #: Mutating client calls, waiting to be written (``flux.server.audit``).
    audit: AuditTrail = field(default_factory=AuditTrail)
    db: Database = field(init=False)
    registry: FleetRegistry = field(init=False)
    notifier: Notifier = field(init=False)
    metrics: ServerMetrics = field(init=False)
    dispatcher: Dispatcher = field(init=False)
    #: Every namespace's state, so that a request's namespace costs no query.
    namespaces: NamespaceCache = field(default_factory=NamespaceCache)
    #: Client tokens by hash, this replica's copy (``flux.server.tokens``).
    tokens: TokenCache = field(init=False)
    #: The hooks' subscriptions, this replica's copy (``flux.server.outbox``).
    hooks: Subscriptions = field(init=False)
    #: The fleet's summary over the last hours, this replica's samples (``GET /fleet/history``).
    trend: FleetTrend = field(default_factory=FleetTrend)

    def wake_worker(self, name: str | None) -> None:
        """Its claim (here or on another replica) re-reads what it holds."""
        if name:
            self.notifier.notify(topics.worker(name))

    def execution_changed(self, execution_id: str, queued: bool = True) -> None:
        """Whoever waits on it learns of the change; dispatch looks for room. ``queued``
        False: the change queued nothing, it only freed a slot (``Dispatcher.freed``)."""
        self.notifier.notify(topics.execution(execution_id))
        if queued:
            self.dispatcher.kick()
        else:
            self.dispatcher.freed()

    def executions_changed(self, execution_ids: list[str]) -> None:
        for execution_id in execution_ids:
            self.notifier.notify(topics.execution(execution_id))
        self.dispatcher.kick()


def install(app: FastAPI, svc: Services) -> None:
    app.state.services = svc


async def services(request: Request) -> Services:
    """The dependency. ``async``: FastAPI runs a plain ``def`` one on a thread pool."""
    return request.app.state.services
