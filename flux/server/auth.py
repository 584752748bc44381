"""Who may call: FastAPI dependencies for the three kinds of caller. Clients carry the
API token (with --api-token), a registering worker the bootstrap token, a worker its
session token. The edge (``flux.server.limits.credential_gate``) refuses anonymous
calls to routes behind ``GATES`` before their body is read."""

from __future__ import annotations

import hmac
import time

from fastapi import Depends, Header

from flux.server import fleet
from flux.server.errors import Forbidden, Unauthorized
from flux.server.registry import Member
from flux.server.services import Services, services

MISSING_SESSION = "missing worker session token (Authorization: Bearer ...)"
MISSING_BOOTSTRAP = "missing bootstrap token (see 'flux server bootstrap-token')"
MISSING_API_TOKEN = "missing API token (set FLUX_API_TOKEN)"


async def bearer(authorization: str | None = Header(default=None)) -> str | None:
    """Dependencies are ``async``: FastAPI runs a plain ``def`` one on a thread pool,
    which cost a thread hand-off on every worker request."""
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


def _matches(token: str | None, expected: bytes) -> bool:
    return bool(token) and hmac.compare_digest(token.encode(), expected)


async def require_client(token: str | None = Depends(bearer), svc: Services = Depends(services)) -> None:
    """With --api-token set, client calls (everything but the worker protocol) must carry it."""
    if svc.api_token is not None and not _matches(token, svc.api_token):
        raise Unauthorized("missing or wrong API token (set FLUX_API_TOKEN)")


async def require_bootstrap(token: str | None = Depends(bearer), svc: Services = Depends(services)) -> None:
    """Runs before the body is validated: strangers learn nothing about the schema."""
    if not _matches(token, svc.bootstrap_token):
        raise Unauthorized("invalid bootstrap token (see 'flux server bootstrap-token')")


async def worker(token: str | None = Depends(bearer), svc: Services = Depends(services)) -> Member:
    """The worker that owns this session token, from memory; the database only on a miss."""
    if not token:
        raise Unauthorized(MISSING_SESSION)
    registry = svc.registry
    token_hash = fleet.hash_token(token)
    member = registry.by_token(token_hash)
    if member is None:
        now = time.time()
        if not registry.known_bad(token_hash, now):
            member = await svc.db.read(lambda s: fleet.member_for_token(s, token_hash))
        if member is None:
            registry.remember_bad(token_hash, now)
            raise Unauthorized("invalid or revoked worker session token; register again")
        member = registry.admit(member)
    return member


async def named_worker(name: str, member: Member = Depends(worker)) -> Member:
    """The worker of the route's ``{name}``: its own session, not another worker's."""
    if member.name != name:
        raise Forbidden(f"this session belongs to worker {member.name!r}, not {name!r}")
    return member


#: Client routes' dependencies.
CLIENT = [Depends(require_client)]


def gates(api_token: bool) -> dict:
    """Dependency -> the 401 reason the edge answers an anonymous call to its routes with."""
    table = {require_bootstrap: MISSING_BOOTSTRAP, bearer: MISSING_SESSION, worker: MISSING_SESSION, named_worker: MISSING_SESSION}
    if api_token:
        table[require_client] = MISSING_API_TOKEN
    return table
