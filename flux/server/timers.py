"""The server's clock for executions (docs/waits.md): sleepers whose time has come are
queued again (``executions.wake_due``) and executions past their workflow's ``timeout``
end TIMED_OUT (``executions.expire_deadlines``). It also finishes deleting namespaces
left TERMINATING once their executions have ended (``namespace_deletion``, looked at
every ``TICK`` while there are any: an execution's end is a change it hears of).

An idle server spends nothing on it: the loop keeps the earliest due time in memory
(two index lookups: the first sleeper's ``ready_at``, the first unfinished ``deadline``)
and sleeps until then. Any change to an execution, here or on another replica (the
notifier's ``execution:ID`` and ``events:ID`` keys, relayed by LISTEN/NOTIFY), makes it look again, at
most once a ``TICK``; with replicas a look every ``SAFETY`` seconds also covers a
notification lost between them. Replicas sharing a PostgreSQL database lock what they
change (``SKIP LOCKED``), and a lost race is retried at the next look.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from flux.server import executions, namespace_deletion, topics
from flux.server.database import Database
from flux.server.notify import Notifier

log = logging.getLogger("flux.server.timers")

#: The most often it looks again after changes: how late a due sleep may be noticed.
TICK = 1.0
#: With replicas: the longest it goes without looking.
SAFETY = 60.0
#: Executions woken or timed out in one transaction: a pass is bounded, and the API's
#: writes get the database between batches.
BATCH = 500


class Timers:
    def __init__(
        self, db: Database, notifier: Notifier, kick: Callable[[], None], tick: float = TICK, shared: bool = False
    ):
        self.db, self.notifier, self.kick, self.tick, self.shared = db, notifier, kick, tick, shared
        self._changed = asyncio.Event()
        notifier.hooks.append(self._on_notify)

    def _on_notify(self, key: str) -> None:
        topic = topics.parse(key)
        if topic is not None and topic.kind in (
            topics.Kind.EXECUTION,
            topics.Kind.EVENTS,
        ):  # a new run, a checkpoint, an end
            self._changed.set()

    async def run(self) -> None:
        wake, deadline, terminating = await self._look()
        while True:
            purge_at = time.time() + self.tick if terminating else None
            due = min((t for t in (wake, deadline, purge_at) if t is not None), default=None)
            timeout = None if due is None else max(due - time.time(), 0.0)
            if self.shared:
                timeout = SAFETY if timeout is None else min(timeout, SAFETY)
            if await self.notifier.wait(self._changed, timeout if timeout is not None else 1e9):
                await asyncio.sleep(self.tick)  # a burst of changes: one look
            self._changed.clear()
            try:
                await self.fire(time.time(), wake, deadline)
                if terminating:
                    await namespace_deletion.finish_terminating(
                        self.db, namespace_deletion.announce(self.notifier, self.kick)
                    )
                wake, deadline, terminating = await self._look()
            except Exception:  # noqa: BLE001 - a failed look (database away, a replica's race) is retried
                log.exception("timers failed; retrying in %gs", self.tick)
                await asyncio.sleep(self.tick)

    async def _batches(self, act: Callable) -> list[str]:
        """``act`` (ids changed, workers to wake) in transactions of at most ``BATCH``
        until one is short, yielding to the event loop between them."""
        changed: list[str] = []
        while True:
            ids, workers = await self.db.run(act)
            changed += ids
            for worker in set(workers):
                self.notifier.notify(topics.worker(worker))  # its claim refreshes what it holds
            if len(ids) < BATCH:
                return changed
            await asyncio.sleep(0)

    async def _look(self) -> tuple[float | None, float | None, bool]:
        """When the first sleeper is due, and the earliest deadline (None: nothing); and
        whether a namespace is TERMINATING."""
        return await self.db.read(
            lambda s: (executions.first_wake(s), executions.first_deadline(s), bool(namespace_deletion.terminating(s)))
        )

    async def fire(self, now: float, wake: float | None, deadline: float | None) -> None:
        """Act on what the last look found due by ``now`` (a look after every change keeps it current)."""
        changed: list[str] = []
        if wake is not None and wake <= now:
            changed += await self._batches(lambda s: (executions.wake_due(s, now, BATCH), []))
        if deadline is not None and deadline < now:
            changed += await self._batches(lambda s: executions.expire_deadlines(s, now, BATCH))
        for execution_id in changed:
            self.notifier.notify(topics.execution(execution_id))
        if changed:
            self.kick()
