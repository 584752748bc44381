"""A gang member's rendezvous (docs/gangs.md): a worker's member waits here for its
peers before user code runs. Thin: authenticate the worker, one transaction per look
(``flux.server.executions.gangs.arrive``), woken by each arrival in the gang."""

from __future__ import annotations

import asyncio
import contextlib
import time

from fastapi import APIRouter, Depends

from flux.protocol.gangs import Rendezvous, RendezvousReply
from flux.server import topics
from flux.server.auth import worker
from flux.server.errors import WORKER
from flux.server.executions import gangs
from flux.server.registry import Member
from flux.server.services import Services, services

SVC = Depends(services)
#: Seconds between looks while peers are missing (an arrival on another replica wakes none here).
LOOK_AGAIN = 0.5

router = APIRouter()


@router.post("/executions/{execution_id}/rendezvous", response_model=RendezvousReply, responses=WORKER)
async def rendezvous(execution_id: str, body: Rendezvous, member: Member = Depends(worker), svc: Services = SVC):
    """Note the member's address; reply at once when every member has arrived, else
    after ``wait`` seconds with ``ready`` false (post again). 409: do not start."""
    deadline = time.monotonic() + body.wait
    while True:
        gang_id = await svc.db.read(lambda s: gangs.gang_of(s, execution_id))
        with svc.notifier.subscribe(topics.execution(gang_id)) as arrived:
            reply, fresh = await svc.db.run(lambda s: gangs.arrive(s, member.name, execution_id, body))
            if fresh or reply.ready:  # the others look again (the last one's arrival starts them all)
                svc.execution_changed(gang_id, queued=False)
            left = deadline - time.monotonic()
            if reply.ready or left <= 0:
                return reply
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), timeout=min(left, LOOK_AGAIN))
