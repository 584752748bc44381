"""What the dispatcher keeps for placed gangs (docs/gangs.md): their start deadlines, and
the wake-ups a gang's end owes its members' workers once its transaction commits."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Callable

from sqlalchemy.orm import Session

from flux.domain.policy import ExecutionPolicy
from flux.server import executions, topics
from flux.server.database import Database
from flux.server.executions import gang_fate
from flux.server.notify import Notifier

log = logging.getLogger("flux.server.dispatch")


class GangWatch:
    def __init__(self, db: Database, notifier: Notifier, policy: ExecutionPolicy, kick: Callable[[], None]):
        self.db, self.notifier, self.policy, self.kick = db, notifier, policy, kick
        #: When a placed gang's ``start_timeout`` is next up (at once: a restarted server looks).
        self.due = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def started(self) -> None:
        """The dispatcher's loop runs: wake-ups are handed to it."""
        self._loop = asyncio.get_running_loop()

    def placed(self, deadline: float) -> None:
        """A gang was placed whose members must all start by ``deadline``."""
        self.due = min(self.due, deadline)

    def committed(self, session: Session) -> None:
        """After a commit (``Database.after_commit``, the database's thread): the workers a
        gang's end told to stop their members are woken, so are the waiters of the gangs
        that changed, and dispatch looks."""
        workers = session.info.pop(gang_fate.WAKE, None)
        gangs = session.info.pop(gang_fate.CHANGED, set())
        if (workers is None and not gangs) or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: the server is stopping
            self._loop.call_soon_threadsafe(self._wake, workers or set(), gangs)

    def _wake(self, workers: set[str], gangs: set[str]) -> None:
        for worker in workers:
            self.notifier.notify(topics.worker(worker))
        for gang in gangs:
            self.notifier.notify(topics.execution(gang))
        self.kick()

    async def expire(self) -> None:
        """End the attempts of gangs whose members did not all start in time, when one is due."""
        if time.time() < self.due:
            return
        now = time.time()
        try:
            self.due = await self.db.run(lambda s: executions.end_late_gangs(s, self.policy, now))
        except Exception:  # noqa: BLE001 - tried again at the next round
            log.exception("ending late gangs failed; retrying")
            self.due = now + 1.0
