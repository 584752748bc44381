"""A worker that stops: draining itself first (SIGTERM), then shutting down."""

from __future__ import annotations

from flux.domain.attempts import AttemptEnd
from flux.server import fleet, topics
from flux.server.registry import Member
from flux.server.services import Services


async def leave(svc: Services, member: Member) -> None:
    """A worker draining itself to stop: place nothing more on it, and hand back at
    once what it was given but has not received."""
    svc.registry.leave(member)
    handed_back = await svc.db.run(lambda s: fleet.hand_back_undelivered(s, member.name, svc.policy))
    member.hold(None)  # re-read on its next heartbeat or claim
    svc.executions_changed(handed_back)


async def shutdown(svc: Services, name: str) -> list[str]:
    """A worker leaving on purpose: its session ends and its executions are requeued at once."""
    cause = f"worker {name} shut down"
    released = await svc.db.run(lambda s: fleet.release(s, name, AttemptEnd.HANDED_BACK, cause, svc.policy))
    svc.registry.forget(name)
    svc.notifier.notify(topics.auth(name, None))
    svc.executions_changed(released)
    return released
