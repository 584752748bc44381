"""Client tokens (docs/security.md#roles): created with a role and namespaces, listed
without their secret, revoked (the row stays, for the audit log). Only the SHA-256 of
a secret is stored; the secret is shown once, to whoever created it.

``TokenCache`` says who a token is from memory: every replica keeps the active
tokens by hash and reads them again once its copy is older than ``REFRESH_AFTER``,
so a revocation or an expiry is refused everywhere within that (and one request)
without a query per request; expiry is also checked at every call. A revocation also
notifies ``topics.TOKENS``, which makes every replica it reaches read them at the
next call: the refresh is the safety net for a notification lost between replicas. A token this
replica does not know yet (created on another replica a moment ago) is read once,
and an unknown one is remembered as unknown for a while (``RecentMisses``).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from flux.domain.access import Principal, Role, home_namespace
from flux.server import namespaces, topics
from flux.server.access_models import ApiTokenModel
from flux.server.access_schemas import TokenCreate, TokenCreated, TokenInfo
from flux.server.errors import Conflict, NotFound
from flux.server.fleet import hash_token
from flux.server.misses import RecentMisses

PREFIX = "flux_"
#: Seconds a replica's copy of the active tokens may age before it is read again.
REFRESH_AFTER = 2.0
#: How long an unknown token is remembered as unknown, and how many are.
MISS_TTL, MISS_MAX = 2.0, 4096
#: Names the server's own principals use in the audit log.
RESERVED = frozenset({"api-token", "anonymous"})


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def _info(row: ApiTokenModel) -> TokenInfo:
    return TokenInfo(
        name=row.name,
        role=Role(row.role),
        namespaces=row.namespaces,
        namespace=home_namespace(row.namespaces),
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
    )


def create(session: Session, body: TokenCreate, now: float) -> TokenCreated:
    """A new token; 409 when the name is taken (by a revoked token too: names stay unique in the audit
    log), 404 for a namespace that does not exist, 409 for one being deleted."""
    if body.name in RESERVED or session.get(ApiTokenModel, body.name) is not None:
        raise Conflict(f"token name {body.name!r} is taken (a revoked token keeps its name)")
    for namespace in body.namespaces or ():
        namespaces.require_active(session, namespace)  # 404 with its name, as a Kubernetes RoleBinding's
    secret = new_secret()
    row = ApiTokenModel(
        name=body.name,
        token_hash=hash_token(secret),
        role=body.role.value,
        namespaces=body.namespaces,
        created_at=now,
        expires_at=now + body.expires_in if body.expires_in else None,
    )
    session.add(row)
    return TokenCreated(**_info(row).model_dump(), token=secret)


def listed(session: Session) -> list[TokenInfo]:
    return [_info(row) for row in session.scalars(select(ApiTokenModel).order_by(ApiTokenModel.name))]


def revoke(session: Session, name: str, now: float) -> TokenInfo:
    """Revoked from now on (a second revocation keeps the first time); 404 for an unknown name."""
    row = session.get(ApiTokenModel, name)
    if row is None:
        raise NotFound(f"token {name!r} not found")
    if row.revoked_at is None:
        row.revoked_at = now
    return _info(row)


@dataclass(frozen=True)
class Entry:
    principal: Principal
    expires_at: float | None

    def valid(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now


def _entry(row: ApiTokenModel) -> Entry:
    namespaces = frozenset(row.namespaces) if row.namespaces is not None else None
    return Entry(Principal(row.name, Role(row.role), namespaces), row.expires_at)


_ACTIVE = select(ApiTokenModel).where(ApiTokenModel.revoked_at.is_(None))


def active(session: Session, now: float) -> dict[str, Entry]:
    """Every token neither revoked nor expired, by hash."""
    rows = session.scalars(_ACTIVE.where(or_(ApiTokenModel.expires_at.is_(None), ApiTokenModel.expires_at > now)))
    return {row.token_hash: _entry(row) for row in rows}


def by_hash(session: Session, token_hash: str) -> Entry | None:
    row = session.scalars(_ACTIVE.where(ApiTokenModel.token_hash == token_hash)).one_or_none()
    return _entry(row) if row is not None else None


Read = Callable[[Callable[[Session], object]], Awaitable[object]]


class TokenCache:
    """This replica's view of the active tokens (see the module's docstring)."""

    def __init__(self, read: Read, refresh_after: float = REFRESH_AFTER):
        self._read = read
        self.refresh_after = refresh_after
        self._entries: dict[str, Entry] = {}
        self._read_at = float("-inf")
        self._refreshing: asyncio.Task | None = None
        self._misses = RecentMisses(MISS_TTL, MISS_MAX)

    async def principal(self, token: str) -> Principal | None:
        """Who ``token`` is, or None: unknown, revoked or expired."""
        now = time.time()
        if time.monotonic() - self._read_at > self.refresh_after:
            await self._refresh()
        token_hash = hash_token(token)
        entry = self._entries.get(token_hash)
        if entry is None and not self._misses.known(token_hash, now):
            entry = await self._read(lambda s: by_hash(s, token_hash))
            if entry is None:
                self._misses.remember(token_hash, now)
            else:
                self._entries[token_hash] = entry
        return entry.principal if entry is not None and entry.valid(now) else None

    def on_notify(self, key: str) -> None:
        """A hook for ``Notifier``: a token was revoked here or on another replica."""
        if key == topics.TOKENS:
            self._read_at = float("-inf")

    def peek(self, token: str) -> Principal | None:
        """From memory alone (for the audit row of a call refused before it was checked)."""
        entry = self._entries.get(hash_token(token))
        return entry.principal if entry is not None and entry.valid(time.time()) else None

    async def _refresh(self) -> None:
        """One read at a time: calls that find the copy old meanwhile wait for it."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.ensure_future(self._load())
        await asyncio.shield(self._refreshing)

    async def _load(self) -> None:
        started = time.monotonic()
        self._entries = await self._read(lambda s: active(s, time.time()))
        self._read_at = started
