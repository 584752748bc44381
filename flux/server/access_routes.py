"""The routes of tokens (admin only: create, list, revoke), of who a credential is,
and of the audit log (read only: no route changes or deletes a row). Thin: the
checks are ``auth.client``'s, the work ``flux.server.tokens`` and ``flux.server.audit``'s."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from flux.domain.access import Action, Principal
from flux.domain.names import NAME_PATTERN
from flux.server import audit, paging, tokens, topics
from flux.server.access_schemas import AuditEntry, TokenCreate, TokenCreated, TokenInfo, Whoami
from flux.server.auth import CLIENT, caller, client
from flux.server.errors import responses
from flux.server.services import Services, services

ANSWERS = responses(401, 409, 413, 422)
READ = responses(401, 413, 422)
NAME = Path(pattern=NAME_PATTERN, max_length=128, description="The token's name")
SVC = Depends(services)

router = APIRouter()


@router.post(
    "/tokens", response_model=TokenCreated, status_code=201, dependencies=CLIENT, responses=ANSWERS, tags=["tokens"]
)
async def create_token(body: TokenCreate, svc: Services = SVC):
    """A token with a role and namespaces. The secret is in this answer only: the server keeps its hash."""
    return await svc.db.run(lambda s: tokens.create(s, body, time.time()))


@router.get("/tokens", response_model=list[TokenInfo], dependencies=CLIENT, responses=READ, tags=["tokens"])
async def list_tokens(svc: Services = SVC):
    """Every token, revoked and expired ones too: names, roles, namespaces, times; never a secret or a hash."""
    return await svc.db.read(tokens.listed)


@router.delete("/tokens/{name}", response_model=TokenInfo, dependencies=CLIENT, responses=ANSWERS, tags=["tokens"])
async def revoke_token(name: str = NAME, svc: Services = SVC):
    """Refused from now on, on every replica within seconds; the row stays for the audit log."""
    revoked = await svc.db.run(lambda s: tokens.revoke(s, name, time.time()))
    svc.notifier.notify(topics.TOKENS)
    return revoked


@router.get("/whoami", response_model=Whoami, responses=READ, tags=["tokens"])
async def whoami(principal: Principal = Depends(caller)):
    """The name, role and namespaces of the credential presented (any valid one)."""
    namespaces = sorted(principal.namespaces) if principal.namespaces is not None else None
    return Whoami(name=principal.token, role=principal.role, namespaces=namespaces, namespace=principal.home)


@router.get("/audit", response_model=list[AuditEntry], dependencies=CLIENT, responses=READ, tags=["audit"])
async def list_audit(
    request: Request,
    response: Response,
    namespace: str | None = Query(default=None, max_length=128, description="Only calls in this namespace"),
    token: str | None = Query(default=None, max_length=128, description="Only calls with this token (its name)"),
    action: Action | None = Query(default=None, description="Only calls of this action"),
    since: float | None = Query(default=None, ge=0, le=1e11, description="At or after this time (Unix seconds)"),
    limit: int = Query(default=100, ge=1, le=1000),
    after: int | None = Query(default=None, ge=1, le=2**63 - 1, description="The X-Next-Cursor of the previous page"),
    viewer: Principal = Depends(client),
    svc: Services = SVC,
):
    """Mutating calls, newest first, a page at a time (``X-Next-Cursor``): an admin's
    token sees every row, others the rows of their namespaces."""
    where = audit.AuditFilter(namespace=namespace, token=token, action=action, since=since)
    rows = await svc.db.read(lambda s: audit.page(s, where, viewer, limit + 1, after))
    page, cursor = paging.split(rows, limit, lambda row: str(row.id))
    paging.announce(request, response, cursor)
    return page
