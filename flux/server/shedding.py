"""Load shedding: an overloaded server says so at once instead of timing out.

When database work has waited longer than ``shed_after`` seconds for a thread, new
requests that add work (registrations, client calls) are answered 503 with
a ``Retry-After`` as long as the backlog (at least 2 s, at most 30 s), so that the
retries arrive once it has drained; workers add jitter and come back. Heartbeats,
claims, checkpoints and shutdowns are never shed: they keep workers alive, cost
nothing while there is no work (a claim waits in memory), and hand out and finish
work, which is how the backlog drains. A pure ASGI middleware, so a shed request
costs no body parsing.
"""

from __future__ import annotations

import json
import re

from flux.server.database import Database
from flux.server.metrics import ServerMetrics

#: Paths that relieve load or keep the fleet alive: never shed.
NEVER_SHED = re.compile(
    r"^/(health|metrics|workers/[^/]+/(heartbeat|claim|shutdown)|executions/[^/]+/(checkpoint|logs))$"
)
RETRY_AFTER_MIN, RETRY_AFTER_MAX = 2, 30


class LoadShedding:
    def __init__(self, shed_after: float):
        self.shed_after = shed_after
        self.db: Database | None = None
        self.metrics: ServerMetrics | None = None

    def watch(self, db: Database, metrics: ServerMetrics) -> None:
        self.db, self.metrics = db, metrics

    def retry_after(self, path: str) -> int | None:
        """Seconds to ask the caller to wait, or None to serve the request."""
        if not self.shed_after or self.db is None or NEVER_SHED.match(path):
            return None
        waited = self.db.backlog()[1]
        if waited <= self.shed_after:
            return None
        return int(min(max(waited, RETRY_AFTER_MIN), RETRY_AFTER_MAX))

    @property
    def middleware(self):
        shedding = self

        class Middleware:
            def __init__(self, app):
                self.app = app

            async def __call__(self, scope, receive, send):
                retry_after = shedding.retry_after(scope["path"]) if scope["type"] == "http" else None
                if retry_after is None:
                    return await self.app(scope, receive, send)
                shedding.metrics.shed.inc()
                body = json.dumps({"detail": "server overloaded; retry later", "code": "overloaded"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 503,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"retry-after", str(retry_after).encode()),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})

        return Middleware
