"""The default runner: every execution in its own child process.

A crash, OOM kill or ``os._exit`` in workflow code takes down only that child; the
worker ends the attempt (ATTEMPT_ENDED with the exit status, the signal or the memory
ceiling) and the server places the execution again, to replay its completed tasks.
Children die with their worker: each asks the kernel for SIGKILL when its parent
dies (``PR_SET_PDEATHSIG``), and runs in a process group of its own, which the worker
kills whole when it fences or hands back an attempt. Children
are started ahead of demand (a warm pool with the engine already imported), so the
start-up cost of a Python process is paid off the dispatch path. Each child runs one
execution and exits: no state leaks from one execution into the next.

Protocol: the job is one JSON line on the child's stdin; events come back as JSON
lines on the child's original stdout. The child points fd 1 at stderr before user
code runs, so user ``print`` output never corrupts the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from typing import Callable

from flux.domain.attempts import AttemptEnd
from flux.domain.events import ATTEMPT_CLOSING_EVENTS, EventType
from flux.runners.base import Job, Runner, Stop
from flux.runners.protocol import IDLE, PARENT_ENV, reusable
from flux.runners.limits import CgroupMemory, LimitPolicy, Limits
from flux.runtime import make_event

log = logging.getLogger("flux.runners.subprocess")

#: Longest protocol line (one event) accepted from a child.
MAX_EVENT_BYTES = 64 * 1024 * 1024
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


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class SubprocessRunner(Runner):
    name = "subprocess"

    def __init__(
        self,
        warm_processes: int = 2,
        cancel_grace: float = 10.0,
        limits: LimitPolicy | None = None,
        max_executions_per_child: int = 100,
        max_idle: int | None = None,
    ):
        self.warm_processes = warm_processes
        #: Idle children kept after they served (boots are dear, idle children cheap).
        self.max_idle = max(max_idle or warm_processes, warm_processes)
        self.cancel_grace = cancel_grace
        self.limits = limits or LimitPolicy()
        #: 1 gives every execution a fresh process; more lets a clean child serve again.
        self.max_executions_per_child = max_executions_per_child
        self._pool: asyncio.Queue[asyncio.subprocess.Process] = asyncio.Queue()
        self._refills: set[asyncio.Task] = set()
        #: Children running a job after which they are expected back in the pool.
        self._returning = 0
        self._runs: dict[int, int] = {}

    async def _spawn(self, *command: str) -> asyncio.subprocess.Process:
        # A session of its own: a terminal's Ctrl-C reaches the worker, which drains,
        # not its children; and killing the group also kills what a task started.
        return await asyncio.create_subprocess_exec(
            *(command or (sys.executable, "-m", "flux.runners.child")),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=MAX_EVENT_BYTES,
            start_new_session=True,
            env={**os.environ, PARENT_ENV: str(os.getpid())},
        )

    async def _refill(self) -> None:
        self._pool.put_nowait(await self._spawn())

    def _schedule_refill(self) -> None:
        task = asyncio.create_task(self._refill())
        self._refills.add(task)
        task.add_done_callback(self._refills.discard)

    async def start(self) -> None:
        self._top_up()

    def _top_up(self) -> None:
        """Keep ``warm_processes`` children idle or booting, counting those coming back."""
        missing = self.warm_processes - self._pool.qsize() - len(self._refills) - self._returning
        for _ in range(max(missing, 0)):
            self._schedule_refill()

    def plan(self, job: Job) -> Limits:
        return self.limits.plan(job)

    async def _take(self, job: Job, limits: Limits) -> asyncio.subprocess.Process:
        process = None
        while process is None and not self._pool.empty():
            candidate = self._pool.get_nowait()
            if candidate.returncode is None:
                process = candidate
        if self._will_return(limits):
            self._returning += 1
        self._top_up()
        return process or await self._spawn()

    def _will_return(self, limits: Limits) -> bool:
        return self.max_executions_per_child > 1 and reusable(limits.to_dict())

    def _give_back(self, process: asyncio.subprocess.Process) -> None:
        """A child that reported CHILD_IDLE: back to the pool, or retired once it has served enough."""
        runs = self._runs.get(process.pid, 0) + 1
        if runs >= self.max_executions_per_child or self._pool.qsize() >= self.max_idle:
            self._runs.pop(process.pid, None)
            process.stdin.close()  # EOF: the child exits
            return
        self._runs[process.pid] = runs
        self._pool.put_nowait(process)

    async def run(self, job: Job, emit: Callable[[dict], None], stop: Stop) -> None:
        limits = self.plan(job)
        process = cgroup = watcher = None
        try:
            process = await self._take(job, limits)
            cgroup = self.limits.cgroup_for(job, limits, process.pid)
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps({**job, "limits": limits.to_dict()}).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await process.stdin.drain()
            watcher = asyncio.create_task(self._stop_when_asked(process, stop))
            while line := await process.stdout.readline():
                if stop.kill.is_set():
                    break  # no longer ours: whatever it still says is not recorded
                event = json.loads(line)
                emit(event)
                if event["type"] in ATTEMPT_CLOSING_EVENTS:
                    break  # the attempt is closed; next the child says it is idle, or exits
            else:
                returncode = await process.wait()
                if not stop.kill.is_set():
                    oom = cgroup is not None and CgroupMemory.oom_killed(cgroup)
                    emit(self._lost_child_event(job, returncode, stop.cancel.is_set(), limits.describe_memory() if oom else None))
            watcher.cancel()
            if stop.kill.is_set():
                kill_group(process)
                await process.wait()
            elif process.returncode is None and await self._idle_after_job(process):
                self._give_back(process)
                process = None
            elif process.returncode is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), EXIT_GRACE)
        finally:
            if watcher is not None:
                watcher.cancel()
            if process is not None and process.returncode is None:  # cancelled ourselves: leave no orphan
                kill_group(process)
            if self._will_return(limits):
                self._returning -= 1
            self.limits.release(limits)
            if cgroup is not None:
                CgroupMemory.remove(cgroup)
            if process is not None or not self._pool.qsize():
                self._top_up()

    @staticmethod
    async def _idle_after_job(process: asyncio.subprocess.Process) -> bool:
        try:
            line = await asyncio.wait_for(process.stdout.readline(), EXIT_GRACE)
        except TimeoutError:
            return False
        return bool(line) and json.loads(line) == IDLE

    @staticmethod
    def _lost_child_event(job: Job, returncode: int, cancelled: bool, memory_cause: str | None = None) -> dict:
        """The child died without closing its attempt: a crash of the infrastructure,
        not of the workflow (its cancellation, if one was under way)."""
        reason = f"child process {describe_exit(returncode)}"
        if cancelled:
            return make_event(EventType.WORKFLOW_CANCELLED, job["workflow_name"], value={"reason": reason})
        if memory_cause:
            value = {"end": AttemptEnd.MEMORY_LIMIT.value, "cause": f"{memory_cause}; {reason}"}
        else:
            value = {"end": AttemptEnd.CHILD_DIED.value, "cause": reason}
        return make_event(EventType.ATTEMPT_ENDED, job["workflow_name"], value=value)

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
        for task in list(self._refills):
            task.cancel()
        while not self._pool.empty():
            process = self._pool.get_nowait()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
