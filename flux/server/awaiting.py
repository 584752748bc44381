"""Waiting for an execution to end, in the request that asks: ``GET /executions/{id}?wait=``
and ``POST /workflows/{name}/run?wait=`` (docs/client.md#waiting-for-the-end).

A waiter subscribes to the execution's topic and reads only when a change woke it (or
``WAIT_RECHECK`` passed: the safety net). A run that waits in its own request is one
request and one read fewer than a run followed by a wait: the submission's answer is
what the waiter knows first, so nothing is read before the first change.
"""

from __future__ import annotations

import asyncio
import time

from flux.server import executions, topics
from flux.server.schemas import ExecutionInfo, RunRequest
from flux.server.services import Services

#: A client waiting for an execution re-reads it at least this often (safety net).
WAIT_RECHECK = 30.0
#: The longest one request may wait (seconds); a client that waits longer asks again.
MAX_WAIT = 300


async def show(svc: Services, execution_id: str, ns: str, wait: float) -> ExecutionInfo:
    """The execution once it has ended, or as it is after ``wait`` seconds."""
    with svc.notifier.subscribe(topics.execution(execution_id)) as woken:
        return await _until_ended(svc, woken, execution_id, ns, wait)


async def run(svc: Services, ns: str, name: str, body: RunRequest, wait: float) -> ExecutionInfo:
    """Submit a run; with ``wait``, answer once it has ended or ``wait`` seconds passed."""
    execution = await svc.db.run(lambda s: executions.submit(s, ns, name, body, svc.policy))
    if not wait:
        svc.execution_changed(execution.id)  # whoever watches the list; dispatch
        return execution
    # Subscribed before the dispatcher is kicked: nothing can change it before then.
    with svc.notifier.subscribe(topics.execution(execution.id)) as woken:
        svc.execution_changed(execution.id)
        return await _until_ended(svc, woken, execution.id, ns, wait, seen=True)


async def _until_ended(
    svc: Services, woken: asyncio.Event, execution_id: str, ns: str, wait: float, seen: bool = False
) -> ExecutionInfo:
    """``seen``: the caller has just read it, not over, so the first read waits for a
    change. A read is the state alone until a change woke the waiter, then the row
    (``executions.finished``)."""
    deadline = time.monotonic() + wait
    changed = False
    while True:
        woken.clear()  # before the read: no wake-up falls between it and the wait
        final = deadline - time.monotonic() <= 0 or svc.notifier.stopped
        if final or not seen:
            execution = await svc.db.read(lambda s: executions.finished(s, execution_id, ns, final, changed))
            if execution is not None:
                return execution
        seen = False
        changed = await svc.notifier.wait(woken, max(0.0, min(deadline - time.monotonic(), WAIT_RECHECK)))
