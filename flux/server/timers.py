"""The server's clock for executions (docs/waits.md): once a tick, sleepers whose time
has come are queued again (``executions.wake_due``) and executions past their
workflow's ``timeout`` end TIMED_OUT (``executions.expire_deadlines``).

Each tick first reads whether there is anything to do (two index lookups), so an idle
server takes no write transaction; replicas sharing a PostgreSQL database lock what
they change (``SKIP LOCKED``), and a lost race is retried on the next tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from flux.server import executions
from flux.server.database import Database
from flux.server.notify import Notifier

log = logging.getLogger("flux.server.timers")

#: Seconds between ticks: how late a due sleep or a deadline may be noticed.
TICK = 1.0


class Timers:
    def __init__(self, db: Database, notifier: Notifier, kick: Callable[[], None], tick: float = TICK):
        self.db, self.notifier, self.kick, self.tick = db, notifier, kick, tick

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            try:
                await self.fire(time.time())
            except Exception:  # noqa: BLE001 - a failed tick (database away, a replica's race) is retried next tick
                log.exception("timers tick failed; retrying")

    async def fire(self, now: float) -> None:
        due, expired = await self.db.read(lambda s: (executions.any_due(s, now), executions.any_expired(s, now)))
        changed: list[str] = []
        if due:
            changed += await self.db.run(lambda s: executions.wake_due(s, now))
        if expired:
            timed_out, workers = await self.db.run(lambda s: executions.expire_deadlines(s, now))
            changed += timed_out
            for worker in set(workers):
                self.notifier.notify(f"worker:{worker}")  # its claim refreshes what it holds
        for execution_id in changed:
            self.notifier.notify(f"execution:{execution_id}")
        if changed:
            self.kick()
