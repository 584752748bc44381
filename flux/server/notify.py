"""In-process wake-ups for long polls (a worker's claim, a client's wait).

Waiters also re-check the database on a short period, so a wake-up lost to another
server replica only delays, never strands, a waiter.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Protocol


class Remote(Protocol):
    def publish(self, key: str) -> None: ...


class Notifier:
    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        #: Other replicas (``flux.server.broadcast``), when there can be any.
        self.remote: Remote | None = None
        #: The server is stopping: long polls answer now instead of holding up the exit.
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        for key in list(self._events):
            self.notify_local(key)

    def notify(self, key: str) -> None:
        """Wake waiters on ``key`` here and on every other replica."""
        self.notify_local(key)
        if self.remote is not None:
            self.remote.publish(key)

    def notify_local(self, key: str) -> None:
        event = self._events.pop(key, None)
        if event is not None:
            event.set()

    def listen(self, key: str) -> asyncio.Event:
        """Subscribe *before* reading the state you wait on, so no wake-up falls in between."""
        return self._events[key]

    @staticmethod
    async def wait(event: asyncio.Event, timeout: float) -> bool:
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
