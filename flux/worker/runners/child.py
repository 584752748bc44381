"""Entry point of a subprocess-runner child: ``python -m flux.worker.runners.child``.

Waits (pre-warmed, the engine already imported) for a job on stdin, runs it, writes
its events and captured log lines to the protocol channel (``flux.worker.runners.protocol``):
the fd named by ``FLUX_PROTOCOL_FD``, or, in a container, the original stdout, with
fd 1 then pointed at fd 2 so that nothing else ever writes there. SIGTERM cancels the
running workflow, which records WORKFLOW_CANCELLED.

A child may serve several executions one after another, like a Celery prefork
worker: after a job that set no ceilings and left nothing behind (no stray task, no
thread still running past a timeout, no cancellation), it reports ``CHILD_IDLE`` and
waits for the next job, keeping the loaded workflow modules warm. Otherwise it
exits, and the worker starts a fresh one.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import stat
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Awaitable, Callable

from flux import tracing
from flux.domain.attempts import AttemptEnd
from flux.domain.events import ATTEMPT_CLOSING_EVENTS, EventType
from flux.model.runtime import forget_preemption, notice_preemption
from flux.worker.runners.asking import ANSWER, Asker
from flux.worker.runners.base import Job
from flux.worker.runners.capture import Capture, Channel
from flux.worker.runners.ceilings import Ceilings, apply_in_child
from flux.worker.runners.execute import execute_job
from flux.worker.runners.lifetime import die_with_parent
from flux.worker.runners.protocol import IDLE, MAX_EVENT_BYTES, PARENT_ENV, PREEMPT, PROTOCOL_FD_ENV


async def read_stdin(jobs: asyncio.Queue, asker: Asker) -> None:
    """Jobs go to ``jobs``, decoded (None at EOF); answers to what the running attempt asked, to ``asker``."""
    readline = await _job_lines()
    while line := await readline():
        message = json.loads(line)
        if message.get("type") == ANSWER:
            asker.answered(message)
        elif message.get("type") == PREEMPT and message.get("withdrawn"):
            forget_preemption(message["execution_id"])
        elif message.get("type") == PREEMPT:
            notice_preemption(message["execution_id"], message.get("by"), float(message["seconds"]))
        else:
            jobs.put_nowait(Job.model_validate(message))
    jobs.put_nowait(None)


async def _job_lines() -> Callable[[], Awaitable[bytes]]:
    """What reads the lines the worker sends (fd 0). A pipe, as the runners give it, is
    read by the event loop itself on a descriptor of its own, and user code gets
    ``/dev/null`` as stdin (the job stream is not its to read, nor its subprocesses').
    Anything else (a file, ``/dev/null``) is read by a thread of its own."""
    loop = asyncio.get_running_loop()
    if not stat.S_ISFIFO(os.fstat(0).st_mode):  # asyncio would take a character device such as
        # /dev/null, then fail to watch it in a callback and wait forever: a thread reads it
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flux-stdin")
        return lambda: loop.run_in_executor(thread, sys.stdin.buffer.readline)
    own = os.dup(0)  # not inheritable: the processes tasks start never hold it
    reader = asyncio.StreamReader(limit=MAX_EVENT_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(own, "rb", buffering=0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return reader.readline


def preload() -> None:
    """Import the programming model workflows use (``from flux import task, workflow``):
    in the template, once, so that a forked child imports none of it per job."""
    import flux

    for module in sorted({name for name in flux._EXPORTS.values() if name.startswith("flux.model.")}):
        importlib.import_module(module)


async def serve(channel: Channel, capture: Capture) -> None:
    loop = asyncio.get_running_loop()
    jobs: asyncio.Queue = asyncio.Queue()
    asker = Asker(channel.send)
    reader = asyncio.create_task(read_stdin(jobs, asker))
    while (job := await jobs.get()) is not None:
        limits = job.limits or Ceilings()
        apply_in_child(limits)
        memory_cause = limits.describe_memory() if limits.memory else None

        def emit(event: dict) -> None:
            if memory_cause and event["type"] == "WORKFLOW_FAILED" and event["value"].get("out_of_memory"):
                # the ceiling, not the workflow: the attempt ends and another one replays it
                value = {"end": AttemptEnd.MEMORY_LIMIT.value, "cause": f"{memory_cause}: {event['value']['error']}"}
                event = {**event, "type": EventType.ATTEMPT_ENDED.value, "value": value}
            if event["type"] in ATTEMPT_CLOSING_EVENTS:
                capture.finish(job.output_mark)  # every line of the attempt before its end
                tracing.flush()  # its task spans are exported before the attempt is reported closed
            channel.send(event)

        capture.install()
        threads_before = threading.active_count() - channel.threads()
        executor = ThreadPoolExecutor(thread_name_prefix="flux-task")  # this job's sync tasks
        loop.set_default_executor(executor)
        with tracing.parented(job.traceparent):  # the task copies it: its spans hang under the worker's
            work = asyncio.create_task(execute_job(job, emit, asker))
        loop.add_signal_handler(signal.SIGTERM, work.cancel)
        try:
            await work
            clean = not work.cancelled()
        except asyncio.CancelledError:
            clean = False
        loop.remove_signal_handler(signal.SIGTERM)
        capture.finish(None)  # what was written after the attempt closed
        tracing.flush()
        executor.shutdown(wait=False, cancel_futures=True)
        if clean and limits.reusable() and await _settled(threads_before, channel):
            channel.send(IDLE)
            continue
        break
    reader.cancel()
    capture.finish(None)
    # Leave at once: a thread that outlived its task's timeout must not hold the process.
    os._exit(0)


async def _settled(threads_before: int, channel: Channel) -> bool:
    """True when the job left no task and no busy thread behind (the stdin reader and the
    channel's own thread aside)."""
    current = asyncio.current_task()
    if any(task is not current and task.get_coro().__name__ != "read_stdin" for task in asyncio.all_tasks()):
        return False
    for _ in range(10):
        if threading.active_count() - channel.threads() <= threads_before:
            return True
        await asyncio.sleep(0.005)
    return False


def main() -> None:
    parent = os.environ.get(PARENT_ENV)
    die_with_parent(int(parent) if parent else None)
    channel_fd = os.environ.pop(PROTOCOL_FD_ENV, None)  # not for the processes tasks start
    if channel_fd is not None:
        fd = int(channel_fd)
        os.set_inheritable(fd, False)  # a shell a task runs must not hold (or write) it
        marked: tuple[int, ...] = (1, 2)  # the runner reads both as pipes
    else:  # in a container: the original stdout is the channel, fd 1 joins fd 2
        fd = os.dup(1)
        os.dup2(2, 1)
        marked = (2,)
    channel = Channel(os.fdopen(fd, "w", encoding="utf-8"))
    tracing.setup("flux-child")  # a no-op unless tracing is configured (docs/tracing.md)
    asyncio.run(serve(channel, Capture(channel, marked)))


if __name__ == "__main__":
    main()
