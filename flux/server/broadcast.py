"""Wake-ups between server replicas over PostgreSQL LISTEN/NOTIFY.

A worker long-polls one replica, but dispatch on any replica may assign it work; a
client may wait on one replica for an execution another replica finishes. Each
replica LISTENs on one channel and re-raises what it hears as local wake-ups, so no
replica polls for them (long polls still re-check the database every second as a
safety net). With SQLite there is one server and nothing to carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Callable

log = logging.getLogger("flux.server.broadcast")

CHANNEL = "flux_wake"
#: Wake-ups sent in one statement at most.
MAX_KEYS = 200


def libpq_url(sqlalchemy_url: str) -> str:
    return "postgresql://" + sqlalchemy_url.split("://", 1)[1]


class PostgresBroadcast:
    def __init__(self, url: str, deliver: Callable[[str], None]):
        self.url = libpq_url(url)
        self.deliver = deliver
        self._send = None
        self._listener: asyncio.Task | None = None
        self._sending: set[asyncio.Task] = set()
        #: Keys not yet handed to a send; a send takes all of them (up to MAX_KEYS).
        self._pending: list[str] = []
        self._send_lock = asyncio.Lock()

    async def start(self) -> None:
        import psycopg

        self._send = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        self._listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        """LISTEN for good: a dropped connection is re-opened with backoff."""
        import psycopg

        delay = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    delay = 0.1
                    async for notification in connection.notifies():
                        self.deliver(notification.payload)
            except psycopg.Error as exc:
                log.warning("LISTEN connection lost (%s); reconnecting in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    def publish(self, key: str) -> None:
        """Fire and forget: a lost wake-up only delays a waiter until its next re-check.

        Keys published while a send is in flight go out together with the next one,
        one ``pg_notify`` each in one statement: a registration storm's thousand
        wake-ups cost a few round trips, not a thousand queued on one connection."""
        self._pending.append(key)
        if len(self._pending) == 1:
            task = asyncio.create_task(self._publish())
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _publish(self) -> None:
        import psycopg

        async with self._send_lock:  # one send at a time; what queues meanwhile goes next, together
            keys, self._pending = self._pending[:MAX_KEYS], self._pending[MAX_KEYS:]
            if self._pending:
                task = asyncio.create_task(self._publish())
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)
            if not keys:
                return
            try:
                if self._send.closed:
                    self._send = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                calls = ", ".join(["pg_notify(%s, %s)"] * len(keys))
                await self._send.execute(f"SELECT {calls}", [v for key in keys for v in (CHANNEL, key)])
            except Exception as exc:  # noqa: BLE001 - see publish
                log.warning("could not publish %d wake-ups (%s...): %s", len(keys), keys[0], exc)

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
        for task in list(self._sending):
            task.cancel()
        if self._send is not None:
            await self._send.close()
