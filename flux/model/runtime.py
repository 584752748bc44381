"""Executes one workflow attempt and turns what happens into events.

The same code serves every runner (subprocess child, in-process, and ``Workflow.run``
for local use): a runner supplies an event sink and the results of tasks that
already completed in earlier attempts; this module does the rest.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import time
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Protocol

from flux import tracing
from flux.domain.events import EventType, make_event
from flux.domain.gang import GangContext
from flux.domain.payloads import PayloadRefused, check_levels, check_size
from flux.domain.secrets import SecretsUnavailable
from flux.model import caching, codecs
from flux.model.calls import call_with, describe_error, failure_of
from flux.model.saga import compensate

EventSink = Callable[[dict], None]
#: The worker's services to an attempt: ``await ask(kind, body)`` (``flux.worker.services``).
Ask = Callable[[str, dict], Awaitable[Any]]


class RunnableTask(Protocol):
    """What the runtime needs of a ``flux.model.task.Task``. ``task`` and ``workflow`` import
    this module, never the other way round (not even for type checking)."""

    name: str
    options: Any
    fn: Callable[..., Any]

    def invoke(self, args: tuple, kwargs: dict) -> Awaitable[Any]: ...


class RunnableWorkflow(Protocol):
    """What the runtime needs of a ``flux.model.workflow.Workflow``."""

    name: str
    fn: Callable[[Any], Awaitable[Any]]


_current: ContextVar["ExecutionContext | None"] = ContextVar("flux_execution_context", default=None)
_current_call: ContextVar["TaskCall | None"] = ContextVar("flux_task_call", default=None)


@dataclass(frozen=True)
class TaskCall:
    """The task call running now, as its body sees it through ``current_task()``.

    Recorded results are exactly once, but a task body that was running when its
    attempt ended (a crash, a drain) runs again in the next attempt: at least once.
    ``idempotency_key`` is the same in every attempt and every retry of this call,
    so a side effect keyed by it (a payment, an upsert) happens once.
    """

    execution_id: str
    #: The execution's attempt (1, 2, ...): changes when a crash moves it elsewhere.
    attempt: int
    #: Stable across attempts: the task's name and its call number in the workflow.
    task_id: str
    #: This call's try under the task's own retry policy (1, 2, ...).
    retry: int

    @property
    def idempotency_key(self) -> str:
        return f"{self.execution_id}/{self.task_id}"

    @property
    def preempting(self) -> "Preempting | None":
        """Set once a more important execution needs this attempt's room (docs/contention.md):
        the attempt ends at ``deadline`` and a later one replays what completed. A long task
        may checkpoint its own progress and return early; nothing is required."""
        return _preempting.get(self.execution_id)


@dataclass(frozen=True)
class Preempting:
    """A preemption notice: for whom, and when (this host's clock, epoch seconds) the attempt ends."""

    by: str | None
    deadline: float


#: Preemption notices of the attempts running in this process, by execution id.
_preempting: dict[str, Preempting] = {}


def notice_preemption(execution_id: str, by: str | None, seconds: float) -> None:
    """The worker says this execution's attempt ends in ``seconds``; None-safe to repeat."""
    _preempting.setdefault(execution_id, Preempting(by, time.time() + seconds))


def forget_preemption(execution_id: str) -> None:
    _preempting.pop(execution_id, None)


def current_task() -> TaskCall | None:
    """The task call whose body is running, or None outside a task."""
    return _current_call.get()


def _context_for_progress() -> "ExecutionContext":
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("flux.progress() is called inside a workflow or one of its tasks")
    return ctx


async def progress(value: Any) -> None:
    """``ctx.progress`` from anywhere in a workflow, tasks included (no ``ctx`` there)."""
    _context_for_progress().progress_nowait(value)


def progress_nowait(value: Any) -> None:
    """``progress`` from synchronous code: a sync task's body, a callback."""
    _context_for_progress().progress_nowait(value)


class TaskFailedError(RuntimeError):
    """Raised inside a workflow when a task failed on its last attempt (flux-core's
    ``ExecutionError``: ``inner_exception`` is what the body raised). Built as ours,
    ``TaskFailedError(message)``, or as flux-core code raises it, ``(inner_exception, message)``."""

    def __init__(self, inner_exception: BaseException | str | None = None, message: str | None = None):
        if isinstance(inner_exception, BaseException):
            super().__init__(message)
            self.__cause__ = inner_exception
        else:
            super().__init__(*(part for part in (inner_exception, message) if part is not None))

    @property
    def inner_exception(self) -> BaseException | None:
        return self.__cause__

    @property
    def message(self) -> str | None:
        return str(self.args[0]) if self.args and self.args[0] is not None else None


class ExecutionTimeoutError(TimeoutError):
    """A task's ``timeout`` passed (flux-core's name for it; a ``TimeoutError`` all the same)."""


def timed_out(name: str, timeout: float) -> str:
    """A task timeout's message in flux-core's words (``Task x (id) timed out (1s).``), so a
    migrated program prints the same line; the id is this engine's call id (``x:1``), the one
    its events name."""
    call = current_task()
    return f"Task {name} ({call.task_id if call is not None else name}) timed out ({timeout}s)."


#: What failed each local run's last attempt, by execution id, until its result takes it
#: (``raised_in``): a local run's ``output`` is this exception, as flux-core's was. Bounded,
#: in case a result is never built; a worker's attempts (``ctx.ask`` set) record nothing.
_raised: dict[str, BaseException] = {}
KEPT_RAISED = 256


def raised_in(execution_id: str) -> BaseException | None:
    """The exception that failed local run ``execution_id`` (once: it is forgotten)."""
    return _raised.pop(execution_id, None)


def _remember_raised(ctx: "ExecutionContext", exc: BaseException) -> None:
    if ctx.ask is not None:
        return
    _raised.pop(ctx.execution_id, None)
    _raised[ctx.execution_id] = exc
    while len(_raised) > KEPT_RAISED:
        del _raised[next(iter(_raised))]


class Suspended(BaseException):
    """A durable wait (``flux.model.waits``: a long sleep, a pause, a call) ends the attempt
    here: the execution waits on the server, holding no worker. A BaseException, like
    ``CancelledError``, so the workflow's ``except Exception`` cannot swallow it."""

    def __init__(self, wait: dict):
        super().__init__(wait["id"])
        self.wait = wait


def current_context() -> "ExecutionContext | None":
    return _current.get()


def plain(value: Any) -> Any:
    """The one JSON form of a value JSON lacks (a datetime, a UUID, an Enum, a timedelta):
    what a result becomes on the way into the log (docs/migrating-from-flux-core.md,
    "JSON-only results"). Anything else stays refused, naming the value's type."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def to_json_value(
    value: Any, what: str, limit: int | None = None, max_levels: int | None = None, chain: bool = False
) -> Any:
    """The log form of a value: JSON, a value JSON lacks as its codec's envelope. Round-trip
    through JSON so a first run and a replay see identical values; over
    ``limit`` bytes of JSON it raises ``PayloadTooLarge`` (the server's payload limit),
    nested more than ``max_levels`` ``PayloadTooDeep`` (the server's nesting limit). ``chain``
    (a task's result, a workflow's output): what JSON lacks is encoded by the codec chain
    (``flux.model.codecs``), each value in its envelope; otherwise it becomes its plain form."""
    default = codecs.encoder() if chain else plain
    try:
        text = json.dumps(value, separators=(",", ":"), default=default)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable: {exc}") from None
    check_size(text, limit, what)
    result = json.loads(text)
    check_levels(text, result, max_levels, what)
    return result


@dataclass
class ExecutionContext:
    """What a workflow sees as ``ctx``; also tracks task ids for replay. ``ExecutionContext[str]``
    is the class itself, so an annotation with an input type needs no ``from __future__ import annotations``."""

    execution_id: str
    workflow_name: str
    input: Any = None
    attempt: int = 1
    completed_tasks: dict[str, Any] = field(default_factory=dict)
    #: The server's payload limit: a task result or the output larger than this fails.
    max_payload_size: int | None = None
    #: Levels a task result, the output or a progress value may nest (the server's
    #: ``max_json_depth`` less a checkpoint's wrapping): deeper fails it, naming it.
    max_payload_levels: int | None = None
    emit: EventSink = field(default=lambda event: None, repr=False)
    #: The loop the workflow runs on: progress from a sync task (a thread) is handed to it.
    loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    #: Values of deterministic builtins recorded in earlier attempts, by call id (``now:1``).
    recorded: dict[str, Any] = field(default_factory=dict)
    #: Task ids whose rollback ended in an earlier attempt: not run again.
    rolled_back: set[str] = field(default_factory=set)
    #: The worker's services (cache lookups, secrets), None in a local run (``flux.worker.services``).
    ask: "Ask | None" = field(default=None, repr=False)
    #: A local run's secrets (``Workflow.run(secrets=...)``); on a worker they come through ``ask``.
    secrets: dict[str, str] | None = field(default=None, repr=False)
    #: A MemoryError ends the attempt (a ceiling the worker set) rather than failing the workflow.
    ends_on_memory_error: bool = False
    #: A gang member's seat and peers once every member started (docs/gangs.md); None otherwise.
    gang: GangContext | None = None
    _task_calls: dict[str, int] = field(default_factory=dict, repr=False)
    _value_calls: dict[str, int] = field(default_factory=dict, repr=False)
    _fetched_secrets: dict[str, str] = field(default_factory=dict, repr=False)
    #: Completed tasks that have a rollback: task id -> (task, args, kwargs), for ``flux.model.saga``.
    compensations: dict[str, tuple] = field(default_factory=dict, repr=False)
    #: What flux-core's ``ExecutionContext(workflow_id=...)`` builds: ``flux.model.workflow.created_run``
    #: (set there: that module imports this one).
    flux_core_run: ClassVar[Callable[..., Any] | None] = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """flux-core's construction, ``ExecutionContext(workflow_id=..., workflow_namespace=...,
        workflow_name=..., input=...)``, gives a local run not yet started (``LocalExecution``):
        ``cancel()`` it, ``ContextManager.save`` it, ``wf.run(execution_id=...)`` runs or returns it."""
        if ("workflow_id" in kwargs or "workflow_namespace" in kwargs) and cls.flux_core_run is not None:
            return cls.flux_core_run(**kwargs)
        return super().__new__(cls)

    @property
    def preempting(self) -> Preempting | None:
        """Set once this attempt is being preempted (``TaskCall.preempting``)."""
        return _preempting.get(self.execution_id)

    def __class_getitem__(cls, item: Any) -> type:
        return cls

    async def progress(self, value: Any) -> None:
        """Record a PROGRESS event (any JSON value), shown live by ``flux workflow run
        --wait``, ``flux execution events --follow`` and the events API."""
        self.progress_nowait(value)

    def progress_nowait(self, value: Any) -> None:
        """``progress`` for synchronous code, including a sync task running on a thread."""
        call = current_task()
        event = make_event(
            EventType.PROGRESS,
            self.workflow_name,
            call.task_id if call else None,
            to_json_value(value, "progress", max_levels=self.max_payload_levels),
        )
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self.loop is None or running is self.loop:
            self.emit(event)
        else:  # a sync task's thread: the event sink belongs to the workflow's loop
            self.loop.call_soon_threadsafe(lambda: self.emit(event))

    def next_task_id(self, name: str) -> str:
        return _next_id(self._task_calls, name)

    def next_value_id(self, name: str) -> str:
        """A deterministic builtin's call id (``now:1``), counted apart from task ids."""
        return _next_id(self._value_calls, name)

    def call_task(self, task: RunnableTask, args: tuple, kwargs: dict):
        """Assign the task id now (call order, not await order) and return the awaitable."""
        return self._run_task(task, self.next_task_id(task.name), args, kwargs)

    async def _run_task(self, task: RunnableTask, task_id: str, args: tuple, kwargs: dict) -> Any:
        if task_id in self.completed_tasks:
            return self._completed(task, task_id, args, kwargs, self.completed_tasks[task_id])
        cache_key = caching.key_for(task, args, kwargs) if task.options.cache else None
        if cache_key is not None:
            hit = await caching.lookup(self, cache_key)
            if hit is not caching.MISS:
                self.emit(make_event(EventType.TASK_CACHE_HIT, task.name, task_id, {"key": cache_key}))
                self.emit(make_event(EventType.TASK_COMPLETED, task.name, task_id, hit))
                return self._completed(task, task_id, args, kwargs, hit)
        options = task.options
        call_kwargs = kwargs
        delay = options.retry_delay
        attempts = options.retry_max_attempts + 1
        for attempt in range(1, attempts + 1):
            self.emit(make_event(EventType.TASK_STARTED, task.name, task_id, {"attempt": attempt}))
            token = _current_call.set(TaskCall(self.execution_id, self.attempt, task_id, attempt))
            try:
                if options.secret_requests:  # inside the try: a secret that is not set fails the task
                    call_kwargs = {**kwargs, "secrets": await self.secrets_for(task)}
                result = to_json_value(
                    await self._invoke(task, task_id, attempt, args, call_kwargs),
                    f"the result of task {task.name!r} ({task_id})",
                    self.max_payload_size,
                    self.max_payload_levels,
                    chain=True,
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any task error is recorded, then retried or raised
                error = "timed out" if isinstance(exc, TimeoutError) else describe_error(exc)
                will_retry = attempt < attempts and not isinstance(exc, PayloadRefused)  # the same again
                self.emit(
                    make_event(
                        EventType.TASK_FAILED,
                        task.name,
                        task_id,
                        {"attempt": attempt, "error": error, "will_retry": will_retry, "failure": failure_of(exc)},
                    )
                )
                if not will_retry:
                    failure = TaskFailedError(f"task {task.name!r} failed after {attempt} attempt(s): {error}")
                    result = await self._fall_back(task, task_id, attempt, args, call_kwargs, failure, exc)
                    break
                await asyncio.sleep(delay)
                delay *= options.retry_backoff
                continue
            finally:
                _current_call.reset(token)
            break
        self.completed_tasks[task_id] = result
        self.emit(make_event(EventType.TASK_COMPLETED, task.name, task_id, result))
        if cache_key is not None:
            caching.store(self, task, task_id, cache_key, result)
        return self._completed(task, task_id, args, kwargs, result)

    def _completed(self, task: RunnableTask, task_id: str, args: tuple, kwargs: dict, result: Any) -> Any:
        """A task's result, first run or replayed, as its body returned it (its log form decoded);
        one with a rollback is remembered for the saga."""
        if getattr(task.options, "rollback", None) is not None:
            self.compensations[task_id] = (task, args, kwargs)
        self.completed_tasks.setdefault(task_id, result)
        return codecs.decode(result)

    async def secrets_for(self, task: RunnableTask) -> dict[str, str]:
        """The secrets a task asked for (``secret_requests``): from the worker, or a local run's."""
        names = list(task.options.secret_requests)
        if self.ask is not None:
            wanted = [name for name in names if name not in self._fetched_secrets]
            if wanted:  # once per attempt: later calls of the attempt reuse them
                try:
                    self._fetched_secrets.update((await self.ask("secrets", {"names": wanted}))["values"])
                except Exception as exc:  # noqa: BLE001 - the server's reason, under a name people can catch
                    raise SecretsUnavailable(str(exc)) from None
            return {name: self._fetched_secrets[name] for name in names}
        available = self.secrets or {}
        missing = [name for name in names if name not in available]
        if missing:
            raise SecretsUnavailable(f"secret(s) not set: {', '.join(missing)} (pass secrets= to run() in a local run)")
        return {name: available[name] for name in names}

    async def _fall_back(
        self,
        task: RunnableTask,
        task_id: str,
        attempt: int,
        args: tuple,
        kwargs: dict,
        failure: TaskFailedError,
        cause: Exception,
    ) -> Any:
        """After a task's last failed try: its ``fallback``'s result stands in for it."""
        fallback = getattr(task.options, "fallback", None)
        if fallback is None:
            raise failure from cause
        self.emit(make_event(EventType.TASK_FALLBACK, task.name, task_id, {"error": describe_error(cause)}))
        try:
            return to_json_value(
                await call_with(fallback, args, kwargs),
                f"the fallback of task {task.name!r} ({task_id})",
                self.max_payload_size,
                self.max_payload_levels,
                chain=True,
            )
        except Exception as exc:  # noqa: BLE001 - the fallback's failure is the task's
            error = f"fallback failed: {describe_error(exc)}"
            value = {"attempt": attempt, "error": error, "will_retry": False, "failure": failure_of(exc)}
            self.emit(make_event(EventType.TASK_FAILED, task.name, task_id, value))
            raise TaskFailedError(f"task {task.name!r} failed after {attempt} attempt(s); its {error}") from exc

    async def _invoke(self, task: RunnableTask, task_id: str, retry: int, args: tuple, kwargs: dict) -> Any:
        """One try of a task call, in a ``flux.task`` span when tracing is on (failed if it raises)."""
        if not tracing.enabled():
            return await task.invoke(args, kwargs)
        attributes = {
            "flux.task_id": task_id,
            "flux.retry": retry,
            "flux.execution_id": self.execution_id,
            "flux.attempt": self.attempt,
        }
        with tracing.span("flux.task", attributes):
            return await task.invoke(args, kwargs)


def _next_id(counters: dict[str, int], name: str) -> str:
    n = counters.get(name, 0) + 1
    counters[name] = n
    return f"{name}:{n}"


async def run_workflow(workflow: RunnableWorkflow, ctx: ExecutionContext) -> tuple[EventType, Any]:
    """Run one attempt; emit WORKFLOW_STARTED and exactly one terminal event (or
    WORKFLOW_SUSPENDED, which ends the attempt but not the execution).

    Returns the terminal event type and its value. Cancellation of the surrounding
    asyncio task is reported as WORKFLOW_CANCELLED and not re-raised, so runners
    treat every outcome the same way.
    """
    ctx.emit(make_event(EventType.WORKFLOW_STARTED, workflow.name, value={"attempt": ctx.attempt}))
    ctx.loop = asyncio.get_running_loop()
    token = _current.set(ctx)
    wait_id = None
    try:
        output = await workflow.fn(ctx)
        storage = getattr(workflow, "output_storage", None)  # flux-core's: the output is its reference
        if storage is not None:
            output = storage.store(f"{workflow.name}_{ctx.execution_id}", output)  # flux-core's reference id
        output = to_json_value(
            output,
            f"the output of workflow {workflow.name!r}",
            ctx.max_payload_size,
            ctx.max_payload_levels,
            chain=True,
        )
        outcome = (EventType.WORKFLOW_COMPLETED, output)
    except asyncio.CancelledError:
        outcome = (EventType.WORKFLOW_CANCELLED, {"reason": "cancelled"})
    except Suspended as suspended:  # a durable wait: the attempt ends, the execution does not
        outcome, wait_id = (EventType.WORKFLOW_SUSPENDED, suspended.wait), suspended.wait["id"]
    except Exception as exc:  # noqa: BLE001 - the workflow's failure is data, not a crash
        structured = failure_of(exc)  # type, message, frames; ``traceback`` kept for older readers
        failure = {
            "error": describe_error(exc),
            **failure_kind(exc),
            "traceback": structured["traceback"],
            "failure": structured,
        }
        if _caused_by(exc, MemoryError):
            failure["out_of_memory"] = True  # a runner with a memory ceiling ends the attempt instead
        outcome = (EventType.WORKFLOW_FAILED, failure)
        _remember_raised(ctx, exc)
        if not (failure.get("out_of_memory") and ctx.ends_on_memory_error):  # else: replayed, not failed
            await compensate(ctx)
    finally:
        _current.reset(token)
    emit, ctx.emit = ctx.emit, _closed  # the log ends here: stray tasks the workflow left cannot add to it
    emit(make_event(outcome[0], workflow.name, wait_id, value=outcome[1]))
    return outcome


def failure_kind(exc: BaseException) -> dict[str, str]:
    """``type`` and ``message`` of what failed the workflow, as flux-core shows a failure
    (beside our ``error``): a task's failure is named by the exception its body raised."""
    while isinstance(exc, TaskFailedError) and exc.__cause__ is not None:  # a task's failure inside a task's
        exc = exc.__cause__
    return {"type": type(exc).__name__, "message": str(exc)}


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _closed(event: dict) -> None:
    """The event sink of an execution that has ended."""
