"""The audit log (docs/security.md#audit): every mutating client call, allowed or
refused, becomes one row: when, which token (its name, never its secret) with which
role, in which namespace, the action, method and path, the answer's status code and
the caller's address. Reads are not recorded, nor is the worker protocol (a worker's
calls are in each execution's event log, and heartbeats would drown the log).

``AuditMiddleware`` sees every request, so it records calls refused at the edge (no
token, a body too large) and by the route's check alike; what ``auth.client`` learned
of the call (its principal, action and namespace) comes through the request's scope.
Rows wait in memory and ``AuditTrail.run`` writes them in one transaction at most
every ``FLUSH_EVERY`` (and at shutdown): a process killed with SIGKILL loses at most
that much. No route changes or deletes a row; ``flux.server.retention`` prunes them
with the rest of the history.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import insert, select
from sqlalchemy.orm import Session
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flux.domain.access import Action, Principal, Role
from flux.server import access
from flux.server.access_models import AuditLogModel
from flux.server.access_schemas import AuditEntry
from flux.server.database import Database

log = logging.getLogger("flux.server.audit")

#: Seconds rows may wait in memory before they are written.
FLUSH_EVERY = 0.25
#: Rows kept while the database cannot take them; past it the oldest are dropped (and counted in the log).
MAX_PENDING = 100_000
#: The status recorded for a call whose client left before any answer.
CLIENT_LEFT = 499


class AuditTrail:
    """Rows not yet written, and the loop that writes them."""

    def __init__(self) -> None:
        self.pending: list[dict] = []
        self._wake = asyncio.Event()

    def append(self, row: dict) -> None:
        self.pending.append(row)
        if len(self.pending) > MAX_PENDING:
            dropped = len(self.pending) - MAX_PENDING
            del self.pending[:dropped]
            log.error(
                "audit: dropped the %d oldest unwritten rows (the database has not taken any for a while)", dropped
            )
        self._wake.set()

    async def flush(self, db: Database) -> None:
        rows, self.pending = self.pending, []
        self._wake.clear()
        if not rows:
            return
        try:
            await db.run(lambda s: s.execute(insert(AuditLogModel), rows))
        except Exception:
            self.pending[:0] = rows  # kept, in order, for the next flush
            raise

    async def run(self, db: Database) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(FLUSH_EVERY)
            try:
                await self.flush(db)
            except Exception:  # noqa: BLE001 - kept for the next flush, never fatal
                log.exception("audit: writing %d rows failed; retrying", len(self.pending))
                self._wake.set()


@dataclass
class AuditSource:
    """How the middleware learns what a call was: the client routes (for calls refused
    before their route ran) and who a request's token is, from memory."""

    trail: AuditTrail
    routes: Callable[[], list[access.ClientRoute]]
    known: Callable[[Headers], Principal | None]


class AuditMiddleware:
    def __init__(self, app: ASGIApp, source: AuditSource):
        self.app = app
        self.source = source

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in access.MUTATING:
            await self.app(scope, receive, send)
            return
        started, status, slot = time.time(), CLIENT_LEFT, {}
        scope[access.CALL_SLOT] = slot  # ``auth.client`` puts the call in it

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        except Exception:
            status = 500 if status == CLIENT_LEFT else status  # what the error middleware outside answers
            raise
        finally:
            self._record(scope, slot.get("call"), started, status)

    def _record(self, scope: Scope, call: access.Call | None, started: float, status: int) -> None:
        if call is None:
            # A client route that answered below 400 went through its check, which filled
            # the slot: so this is a worker's call (not recorded, and not worth a search:
            # heartbeats), or a call refused before its route's check ran.
            if status < 400 or (call := access.match(self.source.routes(), scope)) is None:
                return
        principal = call.principal or self.source.known(Headers(scope=scope))
        client = scope.get("client")
        self.source.trail.append(
            dict(
                time=started,
                token=principal and principal.token,
                role=principal and principal.role.value,
                namespace=call.namespace,
                action=call.action.value,
                method=scope["method"],
                target=scope.get("path", ""),
                status=status,
                client=client[0] if client else None,
            )
        )


# --- reading -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditFilter:
    namespace: str | None = None
    token: str | None = None
    action: Action | None = None
    since: float | None = None


def page(session: Session, where: AuditFilter, viewer: Principal, limit: int, after: int | None) -> list[AuditEntry]:
    """Newest first, ``limit`` rows (the caller asks one more to learn of a next page).
    A principal scoped to namespaces sees only their rows."""
    table = AuditLogModel
    query = select(table).order_by(table.id.desc()).limit(limit)
    if viewer.role != Role.ADMIN and viewer.namespaces is not None:
        query = query.where(table.namespace.in_(sorted(viewer.namespaces)))
    for column, value in ((table.namespace, where.namespace), (table.token, where.token), (table.action, where.action)):
        if value is not None:
            query = query.where(column == value)
    if where.since is not None:
        query = query.where(table.time >= where.since)
    if after is not None:
        query = query.where(table.id < after)
    return [AuditEntry.model_validate(row, from_attributes=True) for row in session.scalars(query)]
