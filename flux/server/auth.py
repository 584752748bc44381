"""Who may call: FastAPI dependencies for the three kinds of caller. Clients carry the
API token (``--api-token``, the admin ``api-token``) or a token created with a role
(``flux.server.tokens``), a registering worker the bootstrap token, a worker its
session token; none is accepted in another's place. ``client`` authorises every
client route by the action ``flux.server.access`` gives it. The edge
(``flux.server.request_limits.credential_gate``) refuses anonymous calls to routes behind
``gates`` before their body is read."""

from __future__ import annotations

import hmac
import time

from fastapi import Depends, Header, Request

from flux.domain.access import Principal, Role
from flux.server import access, fleet
from flux.server.errors import Forbidden, Unauthorized
from flux.server.registry import Member
from flux.server.services import Services, services

MISSING_SESSION = "missing worker session token (Authorization: Bearer ...)"
#: What a refused worker is told: where the right token is, not only the command's name.
BOOTSTRAP_HINT = "on the server's host, 'flux server bootstrap-token' prints the running server's, whatever its --home"
MISSING_BOOTSTRAP = f"missing bootstrap token ({BOOTSTRAP_HINT})"
MISSING_API_TOKEN = "missing API token (set FLUX_API_TOKEN)"
#: Every caller of a server without --api-token (docs/security.md: production sets one).
ANONYMOUS = Principal("anonymous", Role.ADMIN)
#: The --api-token credential: the admin that creates the other tokens.
API_TOKEN = Principal("api-token", Role.ADMIN)


def bearer_of(authorization: str | None) -> str | None:
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


async def bearer(authorization: str | None = Header(default=None)) -> str | None:
    """Dependencies are ``async``: FastAPI runs a plain ``def`` one on a thread pool,
    which cost a thread hand-off on every worker request."""
    return bearer_of(authorization)


def _matches(token: str | None, expected: bytes) -> bool:
    return bool(token) and hmac.compare_digest(token.encode(), expected)


def _without_lookup(token: str | None, svc: Services) -> Principal | None:
    """The principal a call has without looking a token up: anonymous on an open
    server, the admin with the --api-token (compared in constant time)."""
    if token is None:
        return ANONYMOUS if svc.api_token is None else None
    return API_TOKEN if svc.api_token is not None and _matches(token, svc.api_token) else None


async def caller(token: str | None = Depends(bearer), svc: Services = Depends(services)) -> Principal:
    """Who a client call acts as. A presented token is checked even on an open server,
    and its role applies; worker tokens are unknown here (401)."""
    principal = _without_lookup(token, svc)
    if principal is None and token is not None:
        principal = await svc.tokens.principal(token)
    if principal is None:
        raise Unauthorized(MISSING_API_TOKEN if token is None else "invalid, revoked or expired API token")
    return principal


def known(token: str | None, svc: Services) -> Principal | None:
    """Who a token is from memory alone: for the audit row of a call refused before ``caller`` ran."""
    return _without_lookup(token, svc) or (svc.tokens.peek(token) if token is not None else None)


async def client(request: Request, principal: Principal = Depends(caller)) -> Principal:
    """Every client route's dependency: the caller, allowed the route's action in the
    call's namespace (else 404 or 403, ``access.authorise``)."""
    route = request.scope["route"]
    action = access.action_of(request.method, route.path)
    call = access.Call(action, access.namespace_of(action, route.path, request.path_params))
    slot = request.scope.get(access.CALL_SLOT)
    if slot is not None:
        slot["call"] = call
    return access.authorise(principal, call)


async def require_bootstrap(token: str | None = Depends(bearer), svc: Services = Depends(services)) -> None:
    """Runs before the body is validated: strangers learn nothing about the schema."""
    if not _matches(token, svc.bootstrap_token):
        raise Unauthorized(f"invalid bootstrap token ({BOOTSTRAP_HINT})")


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
CLIENT = [Depends(client)]


def is_client(route: object) -> bool:
    """A route behind ``client`` (its own dependency or its router's)."""
    return any(d.call is client for d in getattr(getattr(route, "dependant", None), "dependencies", ()))


def gates(api_token: bool) -> dict:
    """Dependency -> the 401 reason the edge answers an anonymous call to its routes with."""
    table = {
        require_bootstrap: MISSING_BOOTSTRAP,
        bearer: MISSING_SESSION,
        worker: MISSING_SESSION,
        named_worker: MISSING_SESSION,
    }
    if api_token:
        table[client] = table[caller] = MISSING_API_TOKEN
    return table
