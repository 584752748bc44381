"""The claim loop: long polls for work while the worker has a free slot.

The server answers a claim as soon as it assigns work, or after ``claim_wait``, so
an idle worker costs no CPU. The loop ends at once when the worker starts draining.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from flux.protocol.claims import ClaimReply, ClaimRequest
from flux.worker.config import WorkerConfig
from flux.worker.runners.base import Job
from flux.worker.running import Executions


async def claim_loop(config: WorkerConfig, executions: Executions, call: Callable[..., Awaitable[Any]]) -> None:
    """Long-poll for work. A full worker polls too: the server places nothing on it, but
    its reply carries what to cancel and what is preempted (docs/contention.md) at once."""
    while True:
        body = ClaimRequest(wait=config.claim_wait)
        reply = await call(f"/workers/{config.name}/claim", body, timeout=config.claim_wait + 10, reply=ClaimReply)
        executions.cancel(reply.cancel)
        for claimed in reply.executions:
            executions.start(Job.claimed(claimed))
        executions.preempt(reply.preempt)  # after the starts: an attempt claimed already preempted is told too
        executions.withdraw(reply.withdrawn)
        if reply.executions:  # each attempt goes to its runner before the next claim is built and sent
            await asyncio.sleep(0)
