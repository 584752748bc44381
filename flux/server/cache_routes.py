"""The routes of the task cache (``flux.server.task_cache``): a worker's lookup for the
attempt it runs (in that execution's namespace), and clearing (``flux cache clear``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from flux.server import task_cache
from flux.server.auth import CLIENT, worker
from flux.server.errors import responses
from flux.server.registry import Member
from flux.server.schemas import CacheClearReply, CacheLookup, CacheLookupReply
from flux.server.scope import namespace
from flux.server.services import Services, services

WORKER = responses(401, 404, 409, 413, 422)
CLEAR = responses(401, 413, 422)


router = APIRouter()


@router.post("/cache/lookup", response_model=CacheLookupReply, responses=WORKER)
async def lookup(body: CacheLookup, member: Member = Depends(worker), svc: Services = Depends(services)):
    """A worker asks for a cached task result (a live entry: ``hit`` true and its
    ``value``) for the execution it holds, in that execution's namespace."""
    hit, value = await svc.db.read(lambda s: task_cache.lookup_for(s, member.name, body.key, body.execution))
    svc.metrics.cache_lookups.labels(result="hit" if hit else "miss").inc()
    return CacheLookupReply(hit=hit, value=value)


@router.delete("/cache", response_model=CacheClearReply, dependencies=CLIENT, responses=CLEAR)
async def clear(
    task: str | None = Query(default=None, max_length=128, description="Only this task's entries"),
    expired: bool = Query(default=False, description="Only entries past their cache_ttl"),
    ns: str = Depends(namespace),
    svc: Services = Depends(services),
):
    """Invalidate the namespace's cached results: every entry, one task's, or the expired ones."""
    deleted = await svc.db.run(lambda s: task_cache.clear(s, task, expired, namespace=ns))
    return CacheClearReply(deleted=deleted)
