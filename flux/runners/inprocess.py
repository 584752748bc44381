"""Runs executions as asyncio tasks inside the worker process: fastest, no isolation.

A workflow that blocks the event loop stalls the worker's heartbeats, and a crash
takes the worker down with it; use it for trusted, async, short work and for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Callable

from flux.runners.base import Job, Runner, execute_job


class InProcessRunner(Runner):
    name = "inprocess"

    async def run(self, job: Job, emit: Callable[[dict], None], cancel: asyncio.Event) -> None:
        work = asyncio.create_task(execute_job(job, emit))
        stop = asyncio.create_task(cancel.wait())
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not work.done():
            work.cancel()  # run_workflow turns this into WORKFLOW_CANCELLED
        with contextlib.suppress(asyncio.CancelledError):
            await work
