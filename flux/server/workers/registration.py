"""A worker registers: its row, its session token, and what it was found holding."""

from __future__ import annotations

import secrets

from flux.server import fleet, topics
from flux.server.schemas import RegistrationReply, WorkerRegistration
from flux.server.services import Services


async def register_worker(svc: Services, body: WorkerRegistration, held_token: str | None) -> RegistrationReply:
    """A new session for ``body.name``; ``held_token`` proves a restart of the same worker."""
    token = secrets.token_urlsafe(32)
    # Its first claim reads the database only if told of work (``Member.work_hint``):
    # a round may place work on it between the commit and ``admit``; listen from now.
    with svc.notifier.subscribe(topics.worker(body.name)) as placed_meanwhile:
        member, abandon = await svc.db.run(lambda s: fleet.register_worker(s, body, token, held_token, svc.policy))
        member.hint(placed_meanwhile.is_set())
    svc.registry.admit(member)
    svc.notifier.notify(topics.auth(member.name, member.token_hash))
    svc.dispatcher.kick()
    return RegistrationReply(session_token=token, abandon=abandon, heartbeat_interval=svc.registry.pace(member))
