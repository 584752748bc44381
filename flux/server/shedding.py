"""Load shedding: an overloaded server says so at once instead of timing out.

When database work has waited longer than ``shed_after`` seconds for a thread, new
requests that add work (claims, registrations, client calls) are answered 503 with
a ``Retry-After``; workers back off with jitter and come back. Heartbeats,
checkpoints and shutdowns are never shed: they keep workers alive and finish
work, which is how the backlog drains. A pure ASGI middleware, so a shed request
costs no body parsing.
"""

from __future__ import annotations

import json
import re

from flux.server.database import Database
from flux.server.metrics import ServerMetrics

#: Paths that relieve load or keep the fleet alive: never shed.
NEVER_SHED = re.compile(r"^/(health|metrics|workers/[^/]+/(heartbeat|shutdown)|executions/[^/]+/checkpoint)$")
RETRY_AFTER = 2


class LoadShedding:
    def __init__(self, shed_after: float):
        self.shed_after = shed_after
        self.db: Database | None = None
        self.metrics: ServerMetrics | None = None

    def watch(self, db: Database, metrics: ServerMetrics) -> None:
        self.db, self.metrics = db, metrics

    def overloaded(self, path: str) -> bool:
        if not self.shed_after or self.db is None or NEVER_SHED.match(path):
            return False
        return self.db.backlog()[1] > self.shed_after

    @property
    def middleware(self):
        shedding = self

        class Middleware:
            def __init__(self, app):
                self.app = app

            async def __call__(self, scope, receive, send):
                if scope["type"] != "http" or not shedding.overloaded(scope["path"]):
                    return await self.app(scope, receive, send)
                shedding.metrics.shed.inc()
                body = json.dumps({"detail": "server overloaded; retry later", "code": "overloaded"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 503,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"retry-after", str(RETRY_AFTER).encode()),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})

        return Middleware
