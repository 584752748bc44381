"""The queue's page (``/ui/queue``): the current namespace's waiting executions in the
order placement takes them (priority, then oldest), what holds each back, the
namespace's quota as bars of what it holds, its decayed past usage (what fair share
adds to what it holds) and the work preemptions lost (docs/contention.md). Read only."""

from __future__ import annotations

from starlette.responses import Response

from flux.domain.durations import format_duration
from flux.domain.resources import BYTES
from flux.server.console.base import Visit
from flux.server.console.views import duration, size

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


def fair_share(detail: dict) -> dict[str, str]:
    """The namespace's past usage and lost work, as the page words them."""
    half_life = detail.get("fair_share_half_life") or 0
    share = detail.get("usage_share") or 0.0
    lost = detail.get("preemption_lost_seconds") or 0.0
    return {
        "usage": f"{share:.1%} of the fleet" if half_life else "not kept (--fair-share-half-life 0)",
        "half_life": format_duration(half_life) if half_life else "0",
        "lost": duration(lost) if lost else "none",
    }


async def page(visit: Visit) -> Response:
    async with visit.api() as client:
        detail = await client.get(f"/namespaces/{visit.namespace}")
        waiting = await client.get("/executions", state="SCHEDULED", limit=SHOWN)
    waiting.sort(key=lambda e: (-e.get("priority", 0), e["scheduled_at"]))
    return visit.render(
        "queue.html",
        title="Queue",
        active="queue",
        detail=detail,
        bars=quota_bars(detail),
        fair=fair_share(detail),
        waiting=waiting,
    )
