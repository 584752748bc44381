"""A server process's life: open the database, build the fleet in memory, the notifier
and dispatch into ``Services``, run the background loops, and undo it all on stop."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
from typing import AsyncIterator

from fastapi import FastAPI

from flux import tracing
from flux.server import fleet, outbox, retention, schedules, watch
from flux.server import secrets as secret_store
from flux.server.broadcast import PostgresBroadcast
from flux.server.database import Database, is_sqlite
from flux.server.dispatch import Dispatcher
from flux.server.hooks.delivery import Deliveries
from flux.server.liveness import LivenessKeeper
from flux.server.metrics import ServerMetrics
from flux.server.notify import Notifier
from flux.server.outbox import Subscriptions
from flux.server.registry import FleetRegistry
from flux.server.scaling import Autoscaler
from flux.server.serve import long_polls_end_on_stop
from flux.server.services import Services
from flux.server.shedding import LoadShedding
from flux.server.status import StatusWriter
from flux.server.timers import Timers
from flux.server.tokens import TokenCache
from flux.server.workers import summary

#: The GIL hand-over interval of a server process. Database work runs on threads
#: beside the event loop; with CPython's default 5 ms, a loop kept busy by a thousand
#: workers' heartbeats made each transaction wait up to 5 ms for the GIL (B7 at 1,000
#: workers on SQLite: submit->claimed p50 7.7 -> 6.1 ms, heartbeat p99 105 -> 34 ms).
SWITCH_INTERVAL = 0.001
#: The collector's thresholds in a server process (CPython's are 700, 10, 10). A
#: parked long poll is ~300 objects that outlive the young generations, so with a
#: young generation of 700 every claim a thousand workers hold open was promoted to
#: the oldest one within a second, and a full collection (every thread stopped,
#: ~0.1 ms per 400 objects: 0.3-1 s at 1,000 workers) followed every 7-15 s: the
#: tight cluster of late heartbeats. A young generation of 50,000 (a 2-5 ms pass)
#: makes that a full collection every several minutes.
GC_THRESHOLDS = (50_000, 10, 10)


def lifespan(svc: Services, shedding: LoadShedding):  # noqa: ANN201 - FastAPI's lifespan type
    @contextlib.asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[None]:
        sys.setswitchinterval(SWITCH_INTERVAL)
        tracing.setup("flux-server")  # a no-op unless tracing is configured (docs/tracing.md)
        broadcast = await _open(svc)
        shedding.watch(svc.db, svc.metrics)
        keeper, writer, loops = _loops(svc)
        autoscaler = Autoscaler(svc)  # worker pools (docs/autoscaling.md)
        if svc.settings.autoscale:
            svc.notifier.hooks.append(autoscaler.on_notify)
            loops.append(asyncio.create_task(autoscaler.run()))
        # What it took to start (modules, the app, its models, the schema) lives as long
        # as the process: out of the collector's sight, so that the collections a busy
        # server keeps triggering do not walk it (py-spy at 1,000 idle workers: the
        # collector's share of samples fell from 7.2 % to 5.7 %).
        gc.collect()
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)
        try:
            with long_polls_end_on_stop(svc.notifier.stop):
                yield
        finally:
            gc.set_threshold(*thresholds)  # a process that runs several apps (tests) gets its own back
            await _close(svc, keeper, writer, loops, broadcast)
            await autoscaler.close()  # the local provider's workers end with the server

    return run


async def _open(svc: Services) -> PostgresBroadcast | None:
    """The database, the fleet as it stands, the notifier and dispatch; with replicas,
    the broadcast that carries notifications between them."""
    settings = svc.settings
    if not settings.migrated:
        from flux.server.database import migrate

        await asyncio.to_thread(migrate, settings.database_url)
    svc.db = Database(settings.database_url)
    await svc.db.read(lambda s: secret_store.check_key(s, svc.secrets_keys))  # stored secrets need their key
    shared = not is_sqlite(svc.db.url)
    svc.registry = FleetRegistry(
        shared=shared,
        lease_interval=settings.lease_interval_for(shared),
        max_heartbeats_per_second=settings.max_heartbeats_per_second,
    )
    svc.registry.sync(await svc.db.read(fleet.leases))  # known workers; their silence counts from now
    svc.notifier = Notifier()
    svc.notifier.hooks.append(svc.registry.on_notify)
    svc.notifier.hooks.append(watch.relay(svc.notifier))  # GET /watch/executions
    svc.tokens = TokenCache(svc.db.read)
    svc.notifier.hooks.append(svc.tokens.on_notify)  # a revocation on any replica
    broadcast = None
    if shared:
        broadcast = PostgresBroadcast(svc.db.url, svc.notifier.notify_local)
        await broadcast.start()
        svc.notifier.remote = broadcast
    svc.metrics = ServerMetrics(svc.db.statements)
    svc.db.after_commit(svc.metrics.observe_finished)  # durations, once what ended them is committed
    svc.dispatcher = Dispatcher(svc.db, svc.notifier, svc.registry, svc.metrics, svc.policy)
    svc.db.after_commit(svc.dispatcher.gangs.committed)  # a gang's end wakes its members' workers
    svc.hooks = Subscriptions(settings.hooks_max_age, settings.hooks_unschedulable_after)
    svc.db.context[outbox.SLOT] = svc.hooks  # what enqueue matches against (docs/hooks.md)
    svc.db.after_commit(outbox.committed)  # wakes the delivery loop, once what was enqueued is committed
    svc.notifier.hooks.append(svc.hooks.on_notify)
    return broadcast


def _loops(svc: Services) -> tuple[LivenessKeeper, StatusWriter, list[asyncio.Task]]:
    """Dispatch, liveness, worker status, schedules, timers, the audit trail's writes,
    webhooks, the fleet's trend and retention, each a task of its own."""
    shared, kick, policy = svc.registry.shared, svc.dispatcher.kick, svc.policy
    keeper = LivenessKeeper(
        svc.db, svc.registry, svc.notifier, svc.metrics, svc.settings.eviction_grace_period, kick, policy
    )
    writer = StatusWriter(svc.db, svc.registry, svc.notifier)  # samples that moved, in batches
    firing = schedules.ScheduleLoop(svc.db, svc.notifier, svc.metrics, kick, policy, shared)
    timers = Timers(svc.db, svc.notifier, kick, shared=shared)  # due sleeps, timeouts (docs/waits.md)
    deliveries = Deliveries(svc.db, svc.hooks, svc.secrets_keys, svc.settings, svc.metrics, shared)  # webhooks
    runs = (
        svc.dispatcher.run(),
        keeper.run(),
        writer.run(),
        firing.run(),
        timers.run(),
        svc.audit.run(svc.db),
        deliveries.run(),
        summary.keep_trend(svc),
    )
    loops = [asyncio.create_task(loop) for loop in runs]
    if svc.settings.retention:
        loops.append(asyncio.create_task(retention.keep(svc.db, svc.settings.retention)))
    return keeper, writer, loops


async def _close(
    svc: Services,
    keeper: LivenessKeeper,
    writer: StatusWriter,
    loops: list[asyncio.Task],
    broadcast: PostgresBroadcast | None,
) -> None:
    for task in loops:
        task.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    with contextlib.suppress(Exception):
        await keeper.flush()  # a restarted server then shows when each worker was last heard
    with contextlib.suppress(Exception):
        await writer.write()  # ...and each one's last sample
    with contextlib.suppress(Exception):
        await svc.audit.flush(svc.db)  # the calls of the last moments
    if broadcast is not None:
        await broadcast.close()
    svc.db.close()
    tracing.flush()
    gc.unfreeze()  # a process that runs several apps (tests) lets the collector see them again
