"""Runs executions as asyncio tasks inside the worker process: fastest, no isolation.

A workflow that blocks the event loop stalls the worker's heartbeats, and a crash
takes the worker down with it; use it for trusted, async, short work and for tests.
It captures no logs (docs/logs.md): the workflow shares the worker's own streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Callable

from flux.model.runtime import Ask, forget_preemption, notice_preemption
from flux.worker.runners.base import Job, Runner, Stop
from flux.worker.runners.execute import execute_job
from flux.worker.runners.protocol import LogSink


class InProcessRunner(Runner):
    name = "inprocess"

    async def run(
        self, job: Job, emit: Callable[[dict], None], stop: Stop, log: LogSink | None = None, ask: Ask | None = None
    ) -> None:
        def emit_unless_killed(event: dict) -> None:
            if not stop.kill.is_set():
                emit(event)

        async def tell_preemption() -> None:
            while True:
                await stop.preempt.wait()
                stop.preempt.clear()
                if stop.notice is not None:
                    notice_preemption(job.id, stop.notice.by, stop.notice.seconds)
                else:
                    forget_preemption(job.id)

        work = asyncio.create_task(execute_job(job, emit_unless_killed, ask))
        stopping = [asyncio.create_task(stop.cancel.wait()), asyncio.create_task(stop.kill.wait())]
        telling = asyncio.create_task(tell_preemption())
        await asyncio.wait({work, *stopping}, return_when=asyncio.FIRST_COMPLETED)
        for waiter in (*stopping, telling):
            waiter.cancel()
        if not work.done():
            work.cancel()  # run_workflow turns this into WORKFLOW_CANCELLED (dropped when killed)
        with contextlib.suppress(asyncio.CancelledError):
            await work
