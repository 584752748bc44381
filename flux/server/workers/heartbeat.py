"""A worker's heartbeat: liveness and a sample that moved in memory (written in
batches, ``flux.server.status``); the database only for a change in what it holds,
or a worker starting to drain itself."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from flux.domain.samples import metrics_changed, resources_changed
from flux.server import fleet
from flux.server.registry import Member
from flux.server.schemas import Heartbeat, HeartbeatReply
from flux.server.services import Services
from flux.server.workers.leaving import leave


async def heartbeat(svc: Services, member: Member, body: Heartbeat) -> HeartbeatReply:
    """What it should cancel and abandon, and the state it shows."""
    now = time.time()
    svc.registry.beat(member, now)
    svc.metrics.heartbeats.inc()
    _record_status(svc, member, body)
    if body.draining and not member.leaving:
        await leave(svc, member)
    await _reconcile(svc, member, set(body.running), now)
    running = len(member.held or ())
    shown = fleet.display_state(svc.registry.liveness(member, now), member.draining or member.leaving, running)
    return HeartbeatReply(
        state=shown,
        cancel=member.cancelling(),
        abandon=member.foreign(body.running),
        preempt=member.preempting(now),
        withdrawn=member.withdrawn(),
        heartbeat_interval=svc.registry.pace(member),
    )


def _record_status(svc: Services, member: Member, body: Heartbeat) -> None:
    """Only a sample or metrics that moved materially are recorded: placement reads
    them at its next round, the database gets them with the next batch."""
    sample = body.resources.model_dump() if body.resources is not None else None
    moved = sample if sample is not None and resources_changed(member.sample, sample) else None
    published = body.metrics if body.metrics is not None and metrics_changed(member.metrics, body.metrics) else None
    if moved is None and published is None:
        return
    if moved is not None and not moved.get("sampled_at"):  # when it was heard, not when a batch wrote it
        moved["sampled_at"] = datetime.now(UTC).isoformat()
    svc.registry.record_status(member, moved, published)
    svc.metrics.status_writes.inc()
    svc.dispatcher.kick_if_waiting()  # more room, or less, for what waits


async def _reconcile(svc: Services, member: Member, reported: set[str], now: float) -> None:
    """What it reports running against what it holds, when memory cannot tell."""
    interval = svc.registry.interval(member)
    if not svc.registry.needs_reconcile(member, reported, now, fleet.settle_time(interval)):
        return
    held, draining, requeued = await svc.db.run(lambda s: fleet.reconcile(s, member, reported, svc.policy, interval))
    member.reconciled(held, draining)
    if requeued:
        svc.dispatcher.kick()
