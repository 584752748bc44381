"""A worker's claim: a long poll that reads the database only when told there may
be work (or, as a safety net, once every ``CLAIM_RECHECK`` seconds)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Awaitable, Callable, Iterator

from flux.server import executions, fleet, topics
from flux.server.registry import CLAIM_RECHECK, Member
from flux.server.schemas import ClaimedExecution, ClaimReply, ClaimRequest
from flux.server.services import Services


async def claim(
    svc: Services,
    member: Member,
    body: ClaimRequest,
    gone: Callable[[], Awaitable[bool]],
    hang_up: Callable[[], Awaitable[Any]],
) -> ClaimReply:
    """What was placed on it, and what it must cancel; empty after ``body.wait``
    seconds, or once the poll is moot (``gone``: nobody reads the answer any more;
    ``hang_up`` returns when the connection closes, a SIGKILLed worker's at once)."""
    deadline = time.monotonic() + body.wait
    empty = ClaimReply(executions=[], cancel=[])
    with svc.notifier.subscribe(topics.worker(member.name)) as woken, _woken_by(hang_up, woken):
        while True:
            woken.clear()
            if not svc.registry.is_current(member) or member.leaving:
                return empty  # re-registered, evicted or stopping meanwhile
            if await gone():  # hand nothing to a poll nobody reads any more
                await _undeliver(svc, member)
                return empty
            now = time.time()
            handed = member.take_handed()  # delivered by the round that placed it (flux.server.dispatch)
            if handed is not None:
                return _reply(svc, member, *handed, now)
            if svc.registry.claim_should_check(member, now):
                reply = await _deliver(svc, member, now)
                if reply.executions or reply.cancel or reply.preempt or reply.withdrawn:
                    return reply
            remaining = deadline - time.monotonic()
            if remaining <= 0 or svc.notifier.stopped:
                return empty
            await svc.notifier.wait(woken, min(remaining, CLAIM_RECHECK))


@contextlib.contextmanager
def _woken_by(hang_up: Callable[[], Awaitable[Any]], woken: asyncio.Event) -> Iterator[None]:
    """A poll whose worker hung up stops listening at once, so that no round hands
    work to it (``dispatch._claims_waiting``) in the seconds before it is found silent."""
    watch = asyncio.ensure_future(hang_up())
    watch.add_done_callback(lambda _: woken.set())
    try:
        yield
    finally:
        watch.cancel()


async def _undeliver(svc: Services, member: Member) -> None:
    """A round may have handed work to this poll just before it hung up: not read, so
    not delivered (its worker's next claim gets it; if the worker died, it goes back unrun)."""
    handed = member.take_handed()
    if handed is None:
        return
    member.work_hint = True  # the next claim reads the database: the round had cleared the hint
    if handed[0]:
        ids = [job.id for job in handed[0]]
        await svc.db.run(lambda s: executions.undeliver(s, member.name, ids))


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
    return ClaimReply(
        executions=claimed,
        cancel=cancel,
        preempt=member.preempting(now, untold=True),
        withdrawn=member.withdrawn(untold=True),
    )
