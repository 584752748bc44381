"""In-process wake-ups for long polls (a worker's claim, a client's wait).

A waiter subscribes to a key for as long as its request waits and no longer: the
subscription is a context manager, so an unknown execution id or a dropped poll
leaves nothing behind. Keys are plain strings (``worker:NAME``, ``execution:ID``);
``hooks`` see every key notified here, whether it came from this process or from
another replica over ``flux.server.broadcast``, which is how the fleet registry
learns that a worker may have new work without asking the database.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Callable, Iterator, Protocol


class Remote(Protocol):
    def publish(self, key: str) -> None: ...


class Notifier:
    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}
        #: Other replicas (``flux.server.broadcast``), when there can be any.
        self.remote: Remote | None = None
        #: Called with every key notified here (locally or by another replica).
        self.hooks: list[Callable[[str], None]] = []
        #: The server is stopping: long polls answer now instead of holding up the exit.
        self.stopped = False
        #: Subscriptions of the server's own loops (schedules, timers): not long polls.
        self._own = 0

    def stop(self) -> None:
        self.stopped = True
        for key in list(self._waiters):
            self.notify_local(key)

    def notify(self, key: str) -> None:
        """Wake waiters on ``key`` here and on every other replica."""
        self.notify_local(key)
        if self.remote is not None:
            self.remote.publish(key)

    def notify_local(self, key: str) -> None:
        for hook in self.hooks:
            hook(key)
        for event in self._waiters.get(key, ()):
            event.set()

    @contextlib.contextmanager
    def subscribe(self, key: str, own: bool = False) -> Iterator[asyncio.Event]:
        """An event set by every notification of ``key`` while the block runs; ``own``:
        a loop of the server's, not a request (not counted by ``waiting``).

        Clear it *before* reading the state you wait on, so that no wake-up falls
        in between the read and the wait.
        """
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        self._own += own
        try:
            yield event
        finally:
            self._own -= own
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[key]

    def listened(self, key: str) -> bool:
        """Someone in this process waits on ``key`` now (a worker's claim, say). Safe from
        another thread: a stale answer only means the slower path."""
        return bool(self._waiters.get(key))

    def waiting(self) -> int:
        """Requests waiting right now (a gauge, and a leak check in tests)."""
        return sum(len(waiters) for waiters in self._waiters.values()) - self._own

    @staticmethod
    async def wait(event: asyncio.Event, timeout: float) -> bool:
        """Whether ``event`` was set within ``timeout`` seconds. ``asyncio.timeout``, not
        ``wait_for``: no task of its own per wait (a thousand long polls held a thousand),
        and a wake-up resumes the waiter in one step of the loop, not two."""
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            return False
