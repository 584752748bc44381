"""The firing loop: sleeps until the earliest schedule is due, then runs a pass.

It keeps that time in memory and reads the database only when something is due, a
run waits for overlap=queue_one, or it is woken (``schedules`` on the notifier: a
schedule was created or changed here or, through LISTEN/NOTIFY, on another replica).
With no schedule a server spends no statement on them. With replicas a pass every
``SAFETY`` seconds also covers a wake-up lost between them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from flux.domain.policy import ExecutionPolicy
from flux.server import topics
from flux.server.database import Database
from flux.server.metrics import ServerMetrics
from flux.server.notify import Notifier
from flux.server.schedules.firing import Pass, fire_due
from flux.server.schedules.store import pause_all_broken

log = logging.getLogger("flux.server.schedules")

#: The notifier key that wakes the loop.
WAKE = topics.SCHEDULES
#: How often a due time held for overlap=queue_one checks whether the active run ended.
QUEUED_RECHECK = 1.0
#: With replicas: the longest the loop sleeps without reading the schedules.
SAFETY = 30.0
#: After a failed pass (the database away): retry this soon.
RETRY = 1.0
#: A due schedule that another replica holds locked (it is firing it): look again this soon.
LOCKED_BACKOFF = 0.1


class ScheduleLoop:
    def __init__(
        self,
        db: Database,
        notifier: Notifier,
        metrics: ServerMetrics,
        kick: Callable[[], None],
        policy: ExecutionPolicy,
        shared: bool,
    ):
        self.db, self.notifier, self.metrics, self.kick, self.policy = db, notifier, metrics, kick, policy
        self.shared = shared

    async def run(self) -> None:
        try:  # schedules an older version stored outside the accepted domain would never advance
            await self.db.run(pause_all_broken)
        except Exception:  # noqa: BLE001 - the firing pass pauses them too, when it meets them
            log.exception("could not check the stored schedules")
        with self.notifier.subscribe(WAKE, own=True) as woken:
            while True:
                woken.clear()
                try:
                    done = await self.db.run(lambda session: fire_due(session, time.time(), self.policy))
                except Exception:  # noqa: BLE001 - a failed pass is retried; the due times wait in the database
                    log.exception("schedule pass failed; retrying in %gs", RETRY)
                    await self.notifier.wait(woken, RETRY)
                    continue
                self._report(done)
                if done.more:
                    await asyncio.sleep(0)  # a full batch: the next at once, after what else waits
                    continue
                await self.notifier.wait(woken, self._sleep(done))

    def _sleep(self, done: Pass) -> float | None:
        """Seconds until the next pass; None: until woken."""
        limits = [done.next_at - time.time()] if done.next_at is not None else []
        if done.queued:
            limits.append(QUEUED_RECHECK)
        if self.shared:
            limits.append(SAFETY)
        if not limits:
            return None
        delay = min(limits)
        return delay if delay > 0 else LOCKED_BACKOFF

    def _report(self, done: Pass) -> None:
        for lateness in done.lateness:
            self.metrics.schedule_lateness.observe(lateness)
        if done.lateness:
            self.metrics.schedule_fires.labels(how="due").inc(len(done.lateness))
            self.kick()
        for reason, count in done.skipped.items():
            if count:
                self.metrics.schedule_skips.labels(reason=reason).inc(count)
        for execution_id in done.cancelled:
            self.notifier.notify(topics.execution(execution_id))
        for worker in done.wake:
            self.notifier.notify(topics.worker(worker))
