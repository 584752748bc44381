"""The routes of the task cache (``flux.server.task_cache``): a worker's lookup for the
attempt it runs, and clearing (``flux cache clear``)."""

from __future__ import annotations

from typing import Callable

from fastapi import APIRouter, Depends, Query, Request

from flux.server import task_cache
from flux.server.errors import responses
from flux.server.schemas import CacheClearReply, CacheLookup, CacheLookupReply

WORKER = responses(401, 413, 422)
CLIENT = responses(401, 413, 422)


def router(client: list, bearer: Callable, authenticate_worker: Callable) -> APIRouter:
    api = APIRouter()

    @api.post("/cache/lookup", response_model=CacheLookupReply, responses=WORKER)
    async def lookup(body: CacheLookup, request: Request, token: str | None = Depends(bearer)):
        """A worker asks for a cached task result (a live entry: ``hit`` true and its ``value``)."""
        await authenticate_worker(request, token)
        hit, value = await request.app.state.db.read(lambda s: task_cache.lookup(s, body.key))
        request.app.state.metrics.cache_lookups.labels(result="hit" if hit else "miss").inc()
        return CacheLookupReply(hit=hit, value=value)

    @api.delete("/cache", response_model=CacheClearReply, dependencies=client, responses=CLIENT)
    async def clear(
        request: Request,
        task: str | None = Query(default=None, max_length=128, description="Only this task's entries"),
        expired: bool = Query(default=False, description="Only entries past their cache_ttl"),
    ):
        """Invalidate cached results: every entry, one task's, or the expired ones."""
        deleted = await request.app.state.db.run(lambda s: task_cache.clear(s, task, expired))
        return CacheClearReply(deleted=deleted)

    return api
