"""Keeping the fleet's liveness: sweeps, lease flushes, and the server's own lag.

Once a tick (a second, or a quarter of the grace period) the keeper:

- measures its own lag: how late the event loop woke and how long database work
  waited for a thread. A server that is behind on its own work hears heartbeats
  late; it must not blame the workers for that, so after a stretch of lag nobody's
  silence counts from before its end (``FleetRegistry.forgive``);
- sweeps: a worker silent for three beats is STALE (dispatch skips it); one silent
  past ``eviction_grace_period``, and already found stale by an earlier sweep
  (hysteresis: one late sweep cannot evict), is evicted: its token is revoked and
  its work requeued, unless another replica has flushed a fresher lease for it;

and, in a task of its own on a fixed rate of ``lease_interval`` (often with replicas,
which read each other's leases on the same period; rarely on SQLite, where this
process is the only server):

- flushes the leases of the workers heard since the last flush in one statement;
- with replicas, syncs the registry with the workers table (registrations and
  evictions made elsewhere, leases flushed elsewhere).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from flux.domain.hooks import HookEventType
from flux.domain.policy import ExecutionPolicy
from flux.server import fleet, outbox, topics
from flux.server.database import Database
from flux.server.metrics import ServerMetrics
from flux.server.notify import Notifier
from flux.server.registry import FleetRegistry, Member

log = logging.getLogger("flux.server.liveness")

#: Lag (event loop or database queue) beyond which the server forgives silence.
LAG_LIMIT = 1.0
LAG_PROBE = 0.25


class LivenessKeeper:
    def __init__(
        self,
        db: Database,
        registry: FleetRegistry,
        notifier: Notifier,
        metrics: ServerMetrics,
        eviction_grace_period: float,
        kick: Callable[[], None],
        policy: ExecutionPolicy,
    ):
        self.db = db
        self.registry = registry
        self.notifier = notifier
        self.metrics = metrics
        self.grace = eviction_grace_period
        self.kick = kick
        self.policy = policy
        self.tick = min(1.0, eviction_grace_period / 4)
        self._loop_lag = 0.0

    async def run(self) -> None:
        helpers = [asyncio.create_task(self._watch_loop_lag()), asyncio.create_task(self._keep_leases())]
        try:
            while True:
                started = time.monotonic()
                await asyncio.sleep(self.tick)
                # this loop's own overshoot counts too: after a stall it may wake before the watcher
                self._loop_lag = max(self._loop_lag, time.monotonic() - started - self.tick)
                try:
                    self._check_lag()
                    await self.sweep(time.time())
                except Exception:  # noqa: BLE001 - a failed tick (database away) is retried next tick
                    log.exception("liveness tick failed; retrying")
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _keep_leases(self) -> None:
        """Flush (and with replicas, read) leases on a fixed rate, in a task of its own:
        the other replicas' view of our workers must not wait behind sweeps and
        evictions (``FleetRegistry.stale_after`` counts on it being late only by its
        own database work)."""
        period = self.registry.lease_interval
        due = time.monotonic() + period
        while True:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            due = max(due + period, time.monotonic())  # fixed rate; after a stall, at once
            try:
                await self.flush()
                if self.registry.shared:
                    self.registry.sync(await self.db.read(fleet.leases))
            except Exception:  # noqa: BLE001 - the database away: the next period tries again
                log.exception("lease flush failed; retrying")

    async def _watch_loop_lag(self) -> None:
        while True:
            started = time.monotonic()
            await asyncio.sleep(LAG_PROBE)
            self._loop_lag = max(self._loop_lag, time.monotonic() - started - LAG_PROBE)

    def _check_lag(self) -> None:
        lag = max(self._loop_lag, self.db.take_max_queue_wait())
        self._loop_lag = 0.0
        self.metrics.server_lag.set(lag)
        if lag > LAG_LIMIT:
            log.warning("server lagged %.1fs behind its own work; worker silence is not counted for it", lag)
            self.registry.forgive(time.time())

    async def flush(self) -> None:
        heard = self.registry.take_heard()
        if heard:
            await self.db.run(lambda s: fleet.flush_leases(s, heard))

    async def sweep(self, now: float) -> None:
        for member in list(self.registry.members.values()):
            silence = self.registry.silence(member, now)
            if silence <= self.registry.stale_after(member):
                continue
            if member.stale_since is None:
                self.registry.mark_stale(member, now)
                log.info("worker %s is stale (silent %.1fs)", member.name, silence)
                self.kick()  # placement must stop counting on it
                await outbox.fleet_event_alone(
                    self.db.context, self.db.run, HookEventType.WORKER_STALE, member.name, silence=silence
                )
            elif silence > self.grace and now - member.stale_since >= self.tick:
                await self.evict(member, silence)

    async def evict(self, member: Member, silence: float) -> None:
        reason = f"worker {member.name} lost (no heartbeat for {silence:.0f} s)"
        requeued = await self.db.run(
            lambda s: fleet.evict_if_silent(s, member.name, member.last_seen, reason, self.policy)
        )
        if requeued is None:  # gone already, or heard by another replica: the next sync says which
            self.registry.unmark_stale(member)
            return
        log.warning("%s; %d execution(s) requeued", reason, len(requeued))
        self.registry.forget(member.name)
        self.notifier.notify(topics.auth(member.name, None))
        self.metrics.evictions.inc()
        for execution_id in requeued:
            self.notifier.notify(topics.execution(execution_id))
        self.kick()
