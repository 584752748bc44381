"""The queue's page (``/ui/queue``): the current namespace's waiting executions in the
order placement takes them (priority, then oldest), what holds each back, and the
namespace's quota as bars of what it holds (docs/contention.md). Read only."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from flux.domain.resources import BYTES
from flux.server.console.base import Console, answer
from flux.server.console.views import size

#: Waiting executions shown (the oldest of each priority first).
SHOWN = 200


def quota_bars(detail: dict) -> list[dict]:
    """One bar per dimension of the namespace's quota: what it holds against the limit."""
    held = detail.get("held") or {}
    bars = []
    for name, limit in sorted((detail.get("quota") or {}).items()):
        used = held.get(name, 0)
        shown = (lambda v: size(v)) if name in BYTES else (lambda v: f"{v:g}")
        bars.append(
            {
                "label": name,
                "pct": min(100, round(100 * used / limit)) if limit else 100,
                "text": f"{shown(used)} / {shown(limit)}",
            }
        )
    return bars


def register(api: APIRouter, console: Console) -> None:
    @api.get("/ui/queue", include_in_schema=False)
    async def queue_page(request: Request) -> Response:
        async def page() -> Response:
            async with console.api(request) as client:
                namespace = request.state.namespace
                detail = await client.get(f"/namespaces/{namespace}")
                waiting = await client.get("/executions", state="SCHEDULED", limit=SHOWN)
            waiting.sort(key=lambda e: (-e.get("priority", 0), e["scheduled_at"]))
            return console.render(
                request,
                "queue.html",
                title="Queue",
                active="queue",
                detail=detail,
                bars=quota_bars(detail),
                waiting=waiting,
            )

        return await answer(console, request, page)
