"""A worker's claim: a long poll that reads the database only when told there may
be work (or, as a safety net, once every ``CLAIM_RECHECK`` seconds)."""

from __future__ import annotations

import time
from typing import Awaitable, Callable

from flux.server import executions, fleet, topics
from flux.server.registry import CLAIM_RECHECK, Member
from flux.server.schemas import ClaimedExecution, ClaimReply, ClaimRequest
from flux.server.services import Services


async def claim(svc: Services, member: Member, body: ClaimRequest, gone: Callable[[], Awaitable[bool]]) -> ClaimReply:
    """What was placed on it, and what it must cancel; empty after ``body.wait``
    seconds, or once the poll is moot (``gone``: nobody reads the answer any more)."""
    deadline = time.monotonic() + body.wait
    empty = ClaimReply(executions=[], cancel=[])
    with svc.notifier.subscribe(topics.worker(member.name)) as woken:
        while True:
            woken.clear()
            if not svc.registry.is_current(member) or member.leaving:
                return empty  # re-registered, evicted or stopping meanwhile
            if await gone():  # hand nothing to a poll nobody reads any more
                return empty
            now = time.time()
            handed = member.take_handed()  # delivered by the round that placed it (flux.server.dispatch)
            if handed is not None:
                return _reply(svc, member, *handed, now)
            if svc.registry.claim_should_check(member, now):
                reply = await _deliver(svc, member, now)
                if reply.executions or reply.cancel or reply.preempt:
                    return reply
            remaining = deadline - time.monotonic()
            if remaining <= 0 or svc.notifier.stopped:
                return empty
            await svc.notifier.wait(woken, min(remaining, CLAIM_RECHECK))


async def _deliver(svc: Services, member: Member, now: float) -> ClaimReply:
    """One read: what was placed on it is delivered; what it holds is remembered."""
    member.claim_checked(now)
    claimed, cancel, held = await svc.db.run(lambda s: executions.deliver(s, member.name))
    member.hold(fleet.held_map(held))
    return _reply(svc, member, claimed, cancel, now)


def _reply(svc: Services, member: Member, claimed: list[ClaimedExecution], cancel: list[str], now: float) -> ClaimReply:
    for job in claimed:
        job.max_payload_size = svc.settings.max_payload_size
        job.max_json_depth = svc.settings.max_json_depth
    return ClaimReply(executions=claimed, cancel=cancel, preempt=member.preempting(now, untold=True))
