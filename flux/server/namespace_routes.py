"""``/namespaces``: create, list, show and delete namespaces (docs/namespaces.md). Thin:
one service function each; a change makes this process read the namespaces again
(other replicas within ``NamespaceCache.TTL``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Query

from flux.domain.access import Principal
from flux.domain.names import NAME_MAX, NAME_PATTERN
from flux.server import namespace_deletion, namespaces, topics
from flux.server.auth import CLIENT, client
from flux.server.errors import responses
from flux.server.namespace_schemas import (
    NamespaceCreate,
    NamespaceDeletion,
    NamespaceDetail,
    NamespaceInfo,
    NamespaceUpdate,
    QuotaReplacement,
)
from flux.server.services import Services, services

NAME = Path(pattern=NAME_PATTERN, max_length=NAME_MAX, description="The namespace's name")
SVC = Depends(services)

router = APIRouter(prefix="/namespaces", tags=["namespaces"], dependencies=CLIENT)


@router.post("", response_model=NamespaceInfo, status_code=201, responses=responses(401, 409, 413, 422))
async def create_namespace(body: NamespaceCreate, svc: Services = SVC):
    """A new, empty namespace (409 if it exists)."""
    created = await svc.db.run(lambda s: namespaces.create(s, body.name))
    svc.namespaces.forget()
    return created


@router.get("", response_model=list[NamespaceInfo], responses=responses(401, 413, 422))
async def list_namespaces(svc: Services = SVC, principal: Principal = Depends(client)):
    """The namespaces the caller's token may see."""
    return [info for info in await svc.db.read(namespaces.listed) if principal.sees(info.name)]


@router.get("/{name}", response_model=NamespaceDetail, responses=responses(401, 404, 413, 422))
async def show_namespace(name: str = NAME, svc: Services = SVC):
    """Its state and what it holds: workflows, executions by state, schedules, secrets."""
    return await svc.db.read(lambda s: namespaces.detail(s, name, svc.policy.fair_share_half_life))


@router.patch("/{name}", response_model=NamespaceDetail, responses=responses(401, 403, 404, 413, 422))
async def update_namespace(body: NamespaceUpdate, name: str = NAME, svc: Services = SVC):
    """Its fair-share weight and its quota (docs/contention.md); placement reads them at its next round.
    The quota is merged: the keys given change, a null removes one, the others are kept."""
    changed = await svc.db.run(lambda s: namespaces.update(s, name, body, svc.policy.fair_share_half_life))
    svc.notifier.notify(topics.NAMESPACES)  # every replica's placement reads the rules again
    svc.dispatcher.kick()
    return changed


@router.put("/{name}/quota", response_model=NamespaceDetail, responses=responses(401, 403, 404, 413, 422))
async def replace_quota(body: QuotaReplacement, name: str = NAME, svc: Services = SVC):
    """Its whole quota, replacing the one it had (``{"quota": {}}`` removes it); ``PATCH
    /namespaces/NAME`` changes some keys and keeps the others."""
    half_life = svc.policy.fair_share_half_life
    changed = await svc.db.run(lambda s: namespaces.replace_quota(s, name, body.to_quota(), half_life))
    svc.notifier.notify(topics.NAMESPACES)
    svc.dispatcher.kick()
    return changed


@router.delete("/{name}", response_model=NamespaceDeletion, responses=responses(401, 404, 409, 413, 422))
async def delete_namespace(
    name: str = NAME,
    force: bool = Query(default=False, description="Cancel its unfinished executions (else 409 while it has any)"),
    svc: Services = SVC,
):
    """Delete it with everything in it; 409 for 'default', and while executions in it
    have not finished unless ``force``: then it is TERMINATING until they have ended."""
    changed = namespace_deletion.announce(svc.notifier, svc.dispatcher.kick)
    try:
        return await namespace_deletion.delete_namespace(svc.db, name, force, changed)
    finally:
        svc.namespaces.forget()
