"""The default runner: every execution in its own child process.

A crash, OOM kill or ``os._exit`` in workflow code takes down only that child; the
worker ends the attempt (ATTEMPT_ENDED with the exit status, the signal or the memory
ceiling) and the server places the execution again, to replay its completed tasks.
Children die with their worker: each asks the kernel for SIGKILL when its parent
dies (``PR_SET_PDEATHSIG``), and runs in a process group of its own, which the worker
kills whole when it fences or hands back an attempt. Children
are started ahead of demand (a warm pool with the engine already imported), so the
start-up cost of a Python process is paid off the dispatch path; where the worker
forked a template at start (``flux.worker.runners.template``), children are forked from it,
sharing the worker's pages, instead of started from scratch. The pool is elastic:
``warm_processes`` children (default one) are kept whatever the demand, a burst grows it
up to ``max_idle`` (the worker's slots), and children idle past ``idle_timeout`` exit
(docs/footprint.md). A child that imported a workflow bundle serves only that bundle
afterwards (docs/bundles.md).

Protocol: the job is one JSON line on the child's stdin; events and captured log
lines come back as JSON lines on a protocol channel of its own (``flux.worker.runners.protocol``).
The runner owns the child's fds 1 and 2 and reads them as log lines too
(``flux.worker.runners.pipes``): nothing a job prints can corrupt the protocol, and what it
printed reaches the ``log`` sink before the event that closes its attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import secrets
import signal
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Awaitable, Callable

from flux.domain.attempts import AttemptEnd
from flux.domain.events import ATTEMPT_CLOSING_EVENTS, EventType, make_event
from flux.worker.runners.asking import ASK, answer
from flux.worker.runners.base import Job, Runner, Stop
from flux.worker.runners.ceilings import CeilingPolicy, Ceilings, CgroupMemory
from flux.worker.runners.pipes import MAX_EVENT_BYTES, Child, spawn
from flux.worker.runners.protocol import IDLE, LOG, OUTPUT_MARK, PARENT_ENV, PREEMPT, LogSink
from flux.worker.runners.template import ChildTemplate

if TYPE_CHECKING:
    from flux.model.runtime import Ask

log = logging.getLogger("flux.worker.runners.subprocess")

__all__ = ["MAX_EVENT_BYTES", "SubprocessRunner", "describe_exit", "kill_group"]

#: Seconds a child may take to exit after its terminal event before it is killed.
EXIT_GRACE = 5.0


def kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the child's process group (what its tasks started too), then the child."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


def release_free_heap() -> None:
    """glibc keeps freed heap memory for reuse; after a burst, give it back (``malloc_trim``)."""
    with contextlib.suppress(Exception):  # not glibc: nothing to do
        ctypes.CDLL(None).malloc_trim(0)


def attempt_name(job: Job) -> str:
    """One attempt's name on this host: its cgroup's, its container's."""
    return f"flux-{job.id}-{job.attempt}"


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class SubprocessRunner(Runner):
    name = "subprocess"
    #: The protocol channel is a pipe of its own (False: the child's stdout, for docker).
    own_channel = True

    def __init__(
        self,
        warm_processes: int = 1,
        cancel_grace: float = 10.0,
        limits: CeilingPolicy | None = None,
        max_executions_per_child: int = 100,
        max_idle: int | None = None,
        idle_timeout: float = 60.0,
        template: ChildTemplate | None = None,
    ):
        #: Children kept warm (idle or booting) whatever the demand: the floor of the pool.
        self.warm_processes = warm_processes
        #: Idle children kept after they served, at most (a burst grows the pool to this).
        self.max_idle = max(max_idle or warm_processes, warm_processes)
        #: Seconds an idle child above the floor lives before it exits: the pool shrinks
        #: back to ``warm_processes`` after a burst (docs/footprint.md).
        self.idle_timeout = idle_timeout
        self.cancel_grace = cancel_grace
        self.limits = limits or CeilingPolicy()
        #: 1 gives every execution a fresh process; more lets a clean child serve again.
        self.max_executions_per_child = max_executions_per_child
        #: Idle children, the longest idle on the left: a job takes the right end (the
        #: most recently used child, its pages warm), the reaper retires from the left.
        self._pool: deque[tuple[Child, float]] = deque()
        self._refills: set[asyncio.Task] = set()
        #: Children told to exit (stdin closed), read to the end of their output.
        self._retiring: set[asyncio.Task] = set()
        #: Children running a job after which they are expected back in the pool.
        self._returning = 0
        self._runs: dict[int, int] = {}
        self._reaper: asyncio.Task | None = None
        #: Forks the children (``flux.worker.runners.template``); None: each starts from scratch.
        self.template = template

    async def _spawn(self, *command: str) -> Child:
        # A session of its own: a terminal's Ctrl-C reaches the worker, which drains,
        # not its children; and killing the group also kills what a task started.
        return await spawn(
            command or (sys.executable, "-m", "flux.worker.runners.child"),
            {**os.environ, PARENT_ENV: str(os.getpid())},
            own_channel=self.own_channel,
            template=None if command else self.template,
        )

    async def _refill(self) -> None:
        self._pool.append((await self._spawn(), time.monotonic()))

    def _schedule_refill(self) -> None:
        task = asyncio.create_task(self._refill())
        self._refills.add(task)
        task.add_done_callback(self._refills.discard)

    async def start(self) -> None:
        self._top_up()
        if self.max_idle > self.warm_processes or self.template is not None:
            self._reaper = asyncio.create_task(self._reap_idle())

    async def _reap_idle(self) -> None:
        """Retire children idle longer than ``idle_timeout``, down to the warm floor;
        with a template, children at the floor that served are swapped for fresh forks
        too (a few ms each), whose pages are all still shared. Then the freed heap goes
        back to the system."""
        while True:
            await asyncio.sleep(max(min(self.idle_timeout / 4, 5.0), 0.05))
            expired = time.monotonic() - self.idle_timeout
            retired = []
            while len(self._pool) > self.warm_processes and self._pool[0][1] <= expired:
                retired.append(self._pool.popleft()[0])
            if self.template is not None and self.template.alive:
                served = [entry for entry in self._pool if entry[1] <= expired and self._runs.get(entry[0].pid)]
                for entry in served:
                    self._pool.remove(entry)
                    retired.append(entry[0])
            for child in retired:
                self._retire_soon(child)
            if retired:
                self._top_up()
                release_free_heap()

    def _top_up(self) -> None:
        """Keep ``warm_processes`` children idle or booting, counting those coming back."""
        missing = self.warm_processes - len(self._pool) - len(self._refills) - self._returning
        for _ in range(max(missing, 0)):
            self._schedule_refill()

    def plan(self, job: Job) -> Ceilings:
        return self.limits.plan(job.allotment)

    async def _take(self, job: Job, limits: Ceilings) -> Child:
        child = self._idle_for(job.bundle)
        if self._will_return(limits):
            self._returning += 1
        self._top_up()
        child = child or await self._spawn()
        child.bundle = child.bundle or job.bundle
        return child

    def _idle_for(self, bundle: str | None) -> Child | None:
        """An idle child that may run this bundle: the most recently idle one that ran it
        already (warm), else one that ran no bundle. A child that imported one bundle never
        runs another (versions never share modules); when only such children idle, the
        longest idle is retired so that the pool refills with a fresh one."""
        for where in range(len(self._pool) - 1, -1, -1):  # dead ones go on the way
            if self._pool[where][0].returncode is not None:
                del self._pool[where]
        for fits in (lambda c: c.bundle == bundle, lambda c: c.bundle is None):
            for where in range(len(self._pool) - 1, -1, -1):
                if fits(self._pool[where][0]):
                    child = self._pool[where][0]
                    del self._pool[where]
                    return child
        if self._pool and bundle is not None:
            self._retire_soon(self._pool.popleft()[0])
        return None

    def _will_return(self, limits: Ceilings) -> bool:
        return self.max_executions_per_child > 1 and limits.reusable()

    def _give_back(self, child: Child) -> None:
        """A child that reported CHILD_IDLE: back to the pool, or retired once it has served enough."""
        runs = self._runs.get(child.pid, 0) + 1
        if runs >= self.max_executions_per_child or len(self._pool) >= self.max_idle:
            self._retire_soon(child)
            return
        self._runs[child.pid] = runs
        self._pool.append((child, time.monotonic()))

    def _retire_soon(self, child: Child) -> None:
        self._runs.pop(child.pid, None)
        task = asyncio.create_task(self._retire(child))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def run(
        self, job: Job, emit: Callable[[dict], None], stop: Stop, log: LogSink | None = None, ask: Ask | None = None
    ) -> None:
        limits = self.plan(job)
        gang = job.gang_context()
        if gang is not None:  # what env:// reads, set by the child on itself; such a child then retires
            limits.env.update(gang.env())
        child = cgroup = watcher = None
        answering: set[asyncio.Task] = set()  # the child's questions (flux.worker.runners.asking) being answered
        mark = secrets.token_hex(8)  # this job's output mark (flux.worker.runners.pipes)
        try:
            child = await self._take(job, limits)
            child.sink = log
            process = child.process
            cgroup = self.limits.cgroup_for(attempt_name(job), limits, process.pid)
            assert process.stdin is not None
            sent = job.model_copy(update={"limits": limits, "output_mark": mark})
            process.stdin.write(sent.model_dump_json().encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await process.stdin.drain()
            watcher = asyncio.create_task(self._stop_when_asked(process, stop))
            answering.add(notifier := asyncio.create_task(_tell_preemption(job, stop, self._writer(process))))
            notifier.add_done_callback(answering.discard)
            while line := await child.channel.readline():
                if stop.kill.is_set():
                    break  # no longer ours: whatever it still says is not recorded
                message = json.loads(line)
                if message["type"] == LOG:
                    await child.deliver(message["lines"])
                elif message["type"] == OUTPUT_MARK:
                    await child.reached(mark, message["fds"], EXIT_GRACE)
                elif message["type"] == ASK:
                    answering.add(task := asyncio.create_task(answer(message, ask, self._writer(process))))
                    task.add_done_callback(answering.discard)
                else:
                    emit(message)
                    if message["type"] in ATTEMPT_CLOSING_EVENTS:
                        break  # the attempt is closed; next the child says it is idle, or exits
            else:
                returncode = await process.wait()
                await child.drained()  # its last words belong to the attempt it ends
                if not stop.kill.is_set():
                    oom = cgroup is not None and CgroupMemory.oom_killed(cgroup)
                    emit(
                        self._lost_child_event(
                            job, returncode, stop.cancel.is_set(), limits.describe_memory() if oom else None
                        )
                    )
            watcher.cancel()
            if stop.kill.is_set():
                kill_group(process)
                await process.wait()
                await child.drained()
            elif process.returncode is None and await self._idle_after_job(child):
                child.sink = None  # what it writes while idle is no job's
                self._give_back(child)
                child = None
            elif process.returncode is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), EXIT_GRACE)
        finally:
            for task in answering:
                task.cancel()
            if watcher is not None:
                watcher.cancel()
            if child is not None:
                child.sink = None  # its pipes are read on to EOF, as no job's
                if child.returncode is None:  # cancelled ourselves: leave no orphan
                    kill_group(child.process)
            if self._will_return(limits):
                self._returning -= 1
            self.limits.release(limits)
            if cgroup is not None:
                CgroupMemory.remove(cgroup)
            if child is not None or not self._pool:
                self._top_up()

    @staticmethod
    def _writer(process: asyncio.subprocess.Process) -> Callable[[bytes], Awaitable[None]]:
        async def write(data: bytes) -> None:
            assert process.stdin is not None
            process.stdin.write(data)
            await process.stdin.drain()

        return write

    @staticmethod
    async def _retire(child: Child) -> None:
        child.process.stdin.close()  # EOF: the child exits
        try:
            await asyncio.wait_for(child.process.wait(), EXIT_GRACE)
        except TimeoutError:
            kill_group(child.process)

    @staticmethod
    async def _idle_after_job(child: Child) -> bool:
        """After the closing event: the lines written since, then CHILD_IDLE (or not)."""
        deadline = asyncio.get_running_loop().time() + EXIT_GRACE
        while True:
            try:
                line = await asyncio.wait_for(child.channel.readline(), deadline - asyncio.get_running_loop().time())
            except TimeoutError:
                return False
            message = json.loads(line) if line else None
            if message is None or message["type"] != LOG:
                return message == IDLE
            await child.deliver(message["lines"])

    @staticmethod
    def _lost_child_event(job: Job, returncode: int, cancelled: bool, memory_cause: str | None = None) -> dict:
        """The child died without closing its attempt: a crash of the infrastructure,
        not of the workflow (its cancellation, if one was under way)."""
        reason = f"child process {describe_exit(returncode)}"
        if cancelled:
            return make_event(EventType.WORKFLOW_CANCELLED, job.workflow_name, value={"reason": reason})
        if memory_cause:
            value = {"end": AttemptEnd.MEMORY_LIMIT.value, "cause": f"{memory_cause}; {reason}"}
        else:
            value = {"end": AttemptEnd.CHILD_DIED.value, "cause": reason}
        return make_event(EventType.ATTEMPT_ENDED, job.workflow_name, value=value)

    async def _stop_when_asked(self, process: asyncio.subprocess.Process, stop: Stop) -> None:
        """Kill: the whole group at once. Cancel: SIGTERM lets the workflow record its
        cancellation; SIGKILL after the grace period (or at once if a kill follows)."""
        cancel, kill = asyncio.create_task(stop.cancel.wait()), asyncio.create_task(stop.kill.wait())
        try:
            await asyncio.wait({cancel, kill}, return_when=asyncio.FIRST_COMPLETED)
            if not stop.kill.is_set():
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(kill), self.cancel_grace)
                if not stop.kill.is_set():
                    log.warning("child %s ignored SIGTERM for %.0fs; killing it", process.pid, self.cancel_grace)
            kill_group(process)
        finally:
            cancel.cancel()
            kill.cancel()

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for task in list(self._refills):
            task.cancel()
        while self._pool:
            child, _ = self._pool.pop()
            with contextlib.suppress(ProcessLookupError):
                child.process.kill()
            await child.process.wait()
            child.close()
        if self._retiring:
            await asyncio.wait(self._retiring, timeout=EXIT_GRACE * 2)
        if self.template is not None:
            self.template.close()


async def _tell_preemption(job: Job, stop: Stop, write: Callable[[bytes], Awaitable[None]]) -> None:
    """A preemption notice, and its withdrawal, go down to the child, which shows it to the workflow."""
    while True:
        await stop.preempt.wait()
        stop.preempt.clear()
        notice = stop.notice
        message = {"type": PREEMPT, "execution_id": job.id}
        if notice is None:
            message["withdrawn"] = True
        else:
            message.update(by=notice.by, seconds=notice.seconds)
        with contextlib.suppress(ConnectionError, RuntimeError):  # the child is gone: nobody to tell
            await write(json.dumps(message).encode() + b"\n")
