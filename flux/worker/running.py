"""The executions a worker runs: each one's attempt in the runner, its outbox of
events, and the checkpoints that carry them to the server.

Events from a running execution are batched: its first checkpoint waits up to
``OPENING_LINGER`` for more (an execution that ends within it sends one); while a
checkpoint request is in flight, or while every one of the worker's
``CHECKPOINTS_IN_FLIGHT`` request slots is taken by other executions, newer events
queue and leave together in its next one, at most ``MAX_CHECKPOINT_EVENTS`` to a
request. A checkpoint refused with 409 means the attempt
was superseded (fenced): its child is killed at once and nothing more is reported for
it. One refused as malformed (another 4xx: a payload nested past the server's limit
that the child did not catch, an event over a cap) is never dropped silently: the child
is killed and the attempt reported FAILED with the server's reason (docs/attempts.md).

Log lines the runner captures go to the attempt's ``LogShipper`` (``flux.worker.logs``),
never into the outbox; the checkpoint that closes an attempt waits until the lines
written before it are on the server, which refuses lines for an attempt that ended by
a crash or a hand-back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import httpx

from flux import tracing
from flux.bundles.archive import BundleError
from flux.domain.attempts import AttemptEnd
from flux.domain.events import ATTEMPT_CLOSING_EVENTS, MAX_CHECKPOINT_EVENTS, EventType, make_event
from flux.logformat import bind
from flux.protocol.checkpoints import CheckpointReply
from flux.protocol.claims import PreemptionNotice, PreemptionWithdrawal
from flux.worker import gangs
from flux.worker.bundles import BundleCache
from flux.worker.logs import LogShipper
from flux.worker.runners import Job, Runner, Stop
from flux.worker.services import AttemptServices

log = logging.getLogger("flux.worker")

Call = Callable[..., Awaitable[Any]]

#: Checkpoint requests a worker has in flight at once. One execution alone never waits
#: (its next batch leaves as soon as the last is answered); a burst of
#: many shares these, so each request carries what piled up meanwhile (docs/footprint.md).
CHECKPOINTS_IN_FLIGHT = 4
#: Seconds an attempt's first checkpoint waits for more of its events (less if the
#: attempt closes first), as Kafka's producer lingers (``linger.ms``, 5 ms since 4.0):
#: an execution that ends within it costs one checkpoint, not two (docs/latency.md).
#: Its events keep their own times (``started_at`` is WORKFLOW_STARTED's); only RUNNING
#: shows up to this much later.
OPENING_LINGER = 0.005


class Outbox:
    """Events of one attempt waiting to be checkpointed, in order."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.ready = asyncio.Event()
        #: Set once the attempt's closing event is in: nothing after it counts.
        self.closing = asyncio.Event()

    @property
    def closed(self) -> bool:
        return self.closing.is_set()

    def put(self, event: dict) -> None:
        if self.closed:
            return  # the attempt is closed: nothing after its last event counts
        self.events.append(event)
        if event["type"] in ATTEMPT_CLOSING_EVENTS:
            self.closing.set()
        self.ready.set()

    async def settled(self, linger: float) -> None:
        """Until the attempt's closing event is in, or ``linger`` seconds pass
        (``asyncio.timeout``: no task of its own, as ``Notifier.wait``)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(linger):
                await self.closing.wait()

    def take(self, limit: int = MAX_CHECKPOINT_EVENTS) -> list[dict]:
        """The oldest ``limit`` events; ``ready`` stays set while more wait."""
        batch, self.events = self.events[:limit], self.events[limit:]
        if not self.events:
            self.ready.clear()
        return batch

    def replace(self, event: dict) -> None:
        """Drop what waits and close the attempt with ``event`` (a refusal's failure)."""
        self.events = []
        self.closing.clear()
        self.put(event)


@dataclass
class RunningExecution:
    job: Job
    logs: LogShipper
    outbox: Outbox = field(default_factory=Outbox)
    stop: Stop = field(default_factory=Stop)
    #: Set when the server says this attempt is no longer ours: killed, reports nothing.
    abandoned: bool = False
    #: Set when this worker ends the attempt itself (a drain's deadline, a preemption's, a failed GPU): how, and why.
    handed_back: tuple[AttemptEnd, str] | None = None
    #: Checkpoint batches sent for this attempt (the server numbers them to drop re-sends).
    batches: int = 0
    #: Whether this attempt holds its bundle in the cache (released when it ends).
    bundle_held: bool = False
    #: Set when the server refused a checkpoint as malformed: the attempt fails with it.
    refused: str | None = None
    #: While a preemption's grace period runs: the end of the attempt at its deadline.
    preempt_timer: asyncio.TimerHandle | None = None
    #: When this worker received the attempt (``time.monotonic``): a gang member's ``start_timeout`` counts from it.
    received: float = field(default_factory=time.monotonic)
    #: A gang member waiting at the rendezvous: no user code has run, so a preemption ends it at once.
    gathering: bool = False


class Executions:
    def __init__(
        self,
        runner: Runner,
        call: Call,
        log_buffer_lines: int = 10_000,
        max_log_bytes: int = 10 * 1024**2,
        capture_output: bool = True,
        bundles: BundleCache | None = None,
        advertise: Callable[[], Awaitable[str]] | None = None,
    ):
        self.runner = runner
        #: The address a gang member's peers reach it at (``--advertise-address``, or found on first use).
        self.advertise = advertise or _loopback
        self.bundles = bundles
        self.call = call
        self.log_buffer_lines, self.max_log_bytes = log_buffer_lines, max_log_bytes
        self.capture_output = capture_output
        self.running: dict[str, RunningExecution] = {}
        self.slot_freed = asyncio.Event()
        #: Checkpoint requests in flight at once, all executions together: while they are
        #: out, events queue in each outbox and leave together (fewer, larger checkpoints).
        self._in_flight = asyncio.Semaphore(CHECKPOINTS_IN_FLIGHT)
        #: One task per running execution, plus its checkpoint flusher.
        self._tasks: set[asyncio.Task] = set()

    def __len__(self) -> int:
        return len(self.running)

    def ids(self) -> list[str]:
        return sorted(self.running)

    def start(self, job: Job) -> None:
        logs = LogShipper(self.call, job.id, job.attempt, self.log_buffer_lines, self.max_log_bytes)
        execution = RunningExecution(job, logs, gathering=job.gang is not None)
        previous = self.running.get(job.id)
        if previous is not None:  # an older attempt still stopping: it is no longer ours
            self._abandon(previous)
        self.running[job.id] = execution
        with bind(execution_id=job.id):  # the worker's own log lines about it name it (--log-format json)
            self._spawn(self._execute(execution))

    def cancel(self, execution_ids: list[str]) -> None:
        """A user cancelled these: the workflow records its cancellation."""
        for execution_id in execution_ids:
            if execution_id in self.running:
                self.running[execution_id].stop.cancel.set()

    def abandon(self, execution_ids: list[str]) -> None:
        """The server says these attempts are no longer ours: kill them at once."""
        for execution_id in execution_ids:
            if execution_id in self.running:
                log.warning("execution %s is no longer this worker's; killing its attempt", execution_id)
                self._abandon(self.running[execution_id])

    def abandon_all(self) -> None:
        for execution in self.running.values():
            self._abandon(execution)

    def hand_back(self, cause: str) -> None:
        """Kill every running attempt and report each ended (``AttemptEnd.DRAINED``),
        so the server resumes it elsewhere from its checkpoints at once."""
        for execution in list(self.running.values()):
            self._end(execution, AttemptEnd.DRAINED, cause)

    def preempt(self, notices: list[PreemptionNotice]) -> None:
        """A more important execution needs these attempts' room: the workflow is told
        (``current_task().preempting``), and at the end of the grace period the attempt
        is stopped and reported ended ``preempted`` (docs/contention.md)."""
        loop = asyncio.get_running_loop()
        for notice in notices:
            execution = self.running.get(notice.execution_id)
            if execution is None or execution.job.attempt != notice.attempt or execution.stop.notice is not None:
                continue
            grace = 0.0 if execution.gathering else notice.seconds  # nothing to save before a gang starts
            log.info("execution %s is preempted by %s: ends in %.1fs", notice.execution_id, notice.by, grace)
            execution.stop.notice = notice
            execution.stop.preempt.set()  # the runner tells the workflow
            cause = f"preempted by {notice.by}" if notice.by else "preempted"
            execution.preempt_timer = loop.call_later(grace, self._end, execution, AttemptEnd.PREEMPTED, cause)

    def withdraw(self, withdrawals: list[PreemptionWithdrawal]) -> None:
        """Preemptions called off in their grace period: the attempt goes on, and the
        workflow's ``current_task().preempting`` is falsy again (docs/contention.md)."""
        for withdrawal in withdrawals:
            execution = self.running.get(withdrawal.execution_id)
            if execution is None or execution.job.attempt != withdrawal.attempt or execution.stop.notice is None:
                continue
            if execution.handed_back is not None:  # its deadline came first: it is already ending
                continue
            log.info("execution %s: its preemption was withdrawn; the attempt goes on", withdrawal.execution_id)
            if execution.preempt_timer is not None:
                execution.preempt_timer.cancel()
                execution.preempt_timer = None
            execution.stop.notice = None
            execution.stop.preempt.set()

    def _end(self, execution: RunningExecution, end: AttemptEnd, cause: str) -> None:
        if (
            not execution.abandoned
            and execution.handed_back is None
            and self.running.get(execution.job.id) is execution
        ):
            execution.handed_back = (end, cause)
            execution.stop.kill.set()

    def devices_failed(self, failed: dict[str, str]) -> list[str]:
        """Stop the attempts allotted a GPU in ``failed`` (UUID -> why) and report each
        ended by ``AttemptEnd.DEVICE_FAILURE``, so the server places it elsewhere at once."""
        stopped = []
        for execution in list(self.running.values()):
            hit = [device.uuid for device in execution.job.allotment.devices if device.uuid in failed]
            if hit and not execution.abandoned and not execution.handed_back:
                log.warning(
                    "execution %s: GPU %s failed (%s); stopping its attempt", execution.job.id, hit[0], failed[hit[0]]
                )
                self._end(execution, AttemptEnd.DEVICE_FAILURE, f"GPU {hit[0]} failed: {failed[hit[0]]}")
                stopped.append(execution.job.id)
        return stopped

    async def wait_empty(self, timeout: float | None, interrupt: asyncio.Event) -> bool:
        """Wait until nothing runs (True), ``timeout`` passes or ``interrupt`` is set."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while self.running and not interrupt.is_set():
            self.slot_freed.clear()
            remaining = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if remaining is not None and remaining <= 0:
                return False
            waiter = asyncio.create_task(interrupt.wait())
            freed = asyncio.create_task(self.slot_freed.wait())
            await asyncio.wait({waiter, freed}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            freed.cancel()
        return not self.running

    async def close(self) -> None:
        """Kill whatever still runs and end every task (the worker is exiting)."""
        self.abandon_all()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5.0)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @staticmethod
    def _abandon(execution: RunningExecution) -> None:
        execution.abandoned = True
        execution.stop.kill.set()
        execution.logs.abandon()

    def _spawn(self, coro) -> asyncio.Task:  # noqa: ANN001
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _execute(self, execution: RunningExecution) -> None:
        """Run one attempt and report it; whatever breaks, the server hears how it ended."""
        flusher = self._spawn(self._flush(execution))
        job = execution.job
        bundle = job.bundle
        services = AttemptServices(self.call, job)  # cache lookups, secrets; masks what it handed out
        try:
            sink = services.redacted(execution.logs.put) if self.capture_output else None
            with self._span(job) as span:
                if span is not None:  # the child's spans hang under this attempt's
                    job = job.model_copy(update={"traceparent": tracing.current_traceparent()})
                if bundle:
                    job = job.model_copy(update={"bundle_root": str(await self._bundle(execution, bundle))})
                start = job if job.gang is None else await self._gang_start(execution, job)
                if start is not None:
                    await self.runner.run(
                        start, services.redacted(execution.outbox.put), execution.stop, log=sink, ask=services
                    )
        except BundleError as exc:
            execution.outbox.put(make_event(EventType.WORKFLOW_FAILED, job.workflow_name, value={"error": str(exc)}))
        except Exception as exc:  # noqa: BLE001 - a runner failure must not kill the worker
            log.exception("execution %s failed in the runner", job.id)
            execution.outbox.put(
                make_event(
                    EventType.WORKFLOW_FAILED, job.workflow_name, value={"error": f"worker runner error: {exc!r}"}
                )
            )
        if execution.handed_back and not execution.abandoned:
            end, cause = execution.handed_back
            execution.outbox.put(
                make_event(EventType.ATTEMPT_ENDED, job.workflow_name, value={"end": end.value, "cause": cause})
            )
        if execution.abandoned:
            flusher.cancel()
        try:
            await flusher
            await execution.logs.close()  # lines written after the attempt closed, if any
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - eviction will requeue it; the worker goes on
            log.exception("could not report execution %s", job.id)
        finally:
            services.forget()
            if bundle and self.bundles is not None and execution.bundle_held:
                self.bundles.release(bundle)
            execution.logs.stop()
            if self.running.get(job.id) is execution:
                del self.running[job.id]
            self.slot_freed.set()

    async def _gang_start(self, execution: RunningExecution, job: Job) -> Job | None:
        """A gang member waits at the rendezvous before its user code runs (``flux.worker.gangs``):
        the job with its peers once every member arrived, or None when it must not start
        (the gang's attempt ended: nothing more is reported; too late: the attempt ends;
        cancelled meanwhile: the cancellation is recorded; stopped: as any stopped attempt)."""
        assert job.gang is not None
        address, seat = await self.advertise(), job.gang
        # the server ends a late gang's attempt itself (counted from the placement); the
        # worker's own give-up is a backstop a little later, so that the server decides
        deadline = execution.received + seat.start_timeout + gangs.BACKSTOP
        try:
            with gangs.reserved_port(address) as port:  # released as the member's process starts
                log.info("execution %s: rank %d of gang %s waits at the rendezvous", job.id, seat.rank, seat.gang_id)
                reply = await gangs.rendezvous(self.call, job, address, port, deadline, execution.stop)
        except gangs.GangEnded as exc:
            log.warning(
                "execution %s attempt %s: its gang's attempt ended before it started: %s", job.id, job.attempt, exc
            )
            self._abandon(execution)
            return None
        except gangs.GangLate:
            log.warning("execution %s attempt %s: %s", job.id, job.attempt, gangs.LATE)
            self._end(execution, AttemptEnd.HANDED_BACK, gangs.LATE)
            return None
        finally:
            execution.gathering = False
        if reply is not None:
            return job.model_copy(update={"rendezvous": reply})
        if execution.stop.cancel.is_set() and not execution.stop.kill.is_set():
            reason = {"reason": "cancelled before its gang started"}
            execution.outbox.put(make_event(EventType.WORKFLOW_CANCELLED, job.workflow_name, value=reason))
        elif not execution.stop.kill.is_set():  # the worker stopped waiting for the server
            self._abandon(execution)
        return None

    async def _bundle(self, execution: RunningExecution, sha256: str):  # noqa: ANN202 - a Path
        """The unpacked bundle of an execution (fetched on first use), held until it ends."""
        if self.bundles is None:
            raise BundleError(f"this worker has no bundle cache; cannot run bundle {sha256}")
        folder = await self.bundles.acquire(sha256)
        execution.bundle_held = True
        return folder

    @staticmethod
    def _span(job: Job):  # noqa: ANN205 - a context manager
        """The ``flux.execution`` span of an attempt, under the server's claim (tracing on)."""
        attributes = {"flux.execution_id": job.id, "flux.workflow": job.workflow_name, "flux.attempt": job.attempt}
        return tracing.span("flux.execution", attributes, parent=job.traceparent)

    @staticmethod
    def _refused(execution: RunningExecution, response: httpx.Response) -> None:
        """The server refused a checkpoint as malformed: sending it again gets the same
        answer, so the child is killed and the attempt fails with the server's reason."""
        job = execution.job
        execution.refused = (
            f"the server refused this attempt's checkpoint ({response.status_code}): {_reason(response)}"
        )
        log.error("execution %s attempt %s: %s", job.id, job.attempt, execution.refused)
        execution.stop.kill.set()
        execution.outbox.replace(
            make_event(EventType.WORKFLOW_FAILED, job.workflow_name, value={"error": execution.refused})
        )

    async def _flush(self, execution: RunningExecution) -> None:
        """Checkpoint batches until the attempt's closing event is on the server."""
        path = f"/executions/{execution.job.id}/checkpoint"
        while True:
            await execution.outbox.ready.wait()
            if not execution.batches:
                await execution.outbox.settled(OPENING_LINGER)
            async with self._in_flight:
                if not await self._checkpoint(execution, path):
                    return

    async def _checkpoint(self, execution: RunningExecution, path: str) -> bool:
        """One checkpoint of what waits in the outbox; False once nothing more is to be sent."""
        batch = execution.outbox.take()
        closing = any(event["type"] in ATTEMPT_CLOSING_EVENTS for event in batch)
        if closing:
            await execution.logs.flush()  # after this checkpoint the server may refuse them
        if execution.abandoned:
            return False
        execution.batches += 1  # a retry inside call re-sends the same number: the server keeps it once
        # the events as the child emitted them (plain JSON): the server validates each one
        body = {"attempt": execution.job.attempt, "batch": execution.batches, "events": batch}
        try:
            reply = await self.call(path, body, reply=CheckpointReply)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code in (403, 404, 409):  # fenced: this attempt is no longer ours
                log.warning(
                    "execution %s attempt %s fenced: %s", execution.job.id, execution.job.attempt, exc.response.text
                )
                self._abandon(execution)
                return False
            if not 400 <= exc.response.status_code < 500 or execution.refused:
                raise  # a refusal of the refusal's own report too: eviction requeues it
            self._refused(execution, exc.response)
            execution.batches -= 1  # not appended: the failure takes its number
            return True
        if reply.cancel:
            execution.stop.cancel.set()
        return not closing


async def _loopback() -> str:
    return "127.0.0.1"


#: The most of a refusal's reason that a failed attempt's error keeps.
REASON_CHARS = 2000


def _reason(response: httpx.Response) -> str:
    """What the server said, in its error shape (``detail``) when it has one."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = detail if isinstance(detail, str) else response.text
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "..."
