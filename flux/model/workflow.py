"""``@workflow``: an async function of ``ctx`` that the server schedules onto workers.

Options are validated when the decorator runs, so a bad ``requests``, ``affinity`` or
``routing`` fails at import time with a message naming the field, never later on a
worker.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from flux.domain.affinity import normalise_affinity
from flux.domain.events import ExecutionState
from flux.domain.gang import Gang, GangContext
from flux.domain.secrets import Redactor
from flux.domain.workflow_options import WorkflowOptions, names
from flux.model import codecs, fluxcore
from flux.model.gang_local import chosen_gang, run_gang
from flux.model.results import Event, RunResult
from flux.model.runtime import ExecutionContext
from flux.model.waits import run_local
from flux.output_storage import OutputStorageReference


@dataclass
class LocalExecution(RunResult):
    """The result of ``Workflow.run``: the same facts the server would record. A run
    that reached ``pause()`` is PAUSED, its pause in ``wait``: ``resume(input)`` goes on.
    flux-core's reading of a result (``has_failed``, ``to_json()``...) is ``RunResult``'s."""

    execution_id: str
    state: ExecutionState
    output: Any
    events: list[dict] = field(default_factory=list)
    #: The pending pause of a PAUSED run: ``{"kind": "pause", "id", "name", "payload"}``.
    wait: dict | None = None
    _resume: Callable[[Any], Any] | None = field(default=None, repr=False)
    workflow_name: str = ""
    input: Any = None
    #: flux-core's ``start_resuming(value)``: the value a later ``run(execution_id=...)`` resumes with.
    resume_with: Any = field(default=None, repr=False)
    #: The workflow's namespace (flux-core's ``workflow_namespace``); None: the default one.
    namespace: str | None = None
    #: flux-core's ``workflow_id`` where its code gave one (``ExecutionContext(workflow_id=...)``).
    given_workflow_id: str | None = field(default=None, repr=False)

    @property
    def succeeded(self) -> bool:
        return self.state is ExecutionState.COMPLETED

    def resume(self, input: Any = None) -> "LocalExecution":
        """Continue a PAUSED run: ``pause()`` returns ``input`` (``flux execution resume``)."""
        if self._resume is None:
            raise RuntimeError(f"execution {self.execution_id} is {self.state.value}, not PAUSED")
        return asyncio.run(self._resume(input))


#: Codecs a local run enables beyond ``std``: it reads back only what it wrote itself.
LOCAL_CODECS = frozenset({"pickle"})

#: The options a workflow exposes as its own attributes (``train.timeout``), ``name`` included.
OPTIONS = frozenset(names())

#: This process's local runs by id, so ``Workflow.resume(id)`` finds a paused one (flux-core
#: kept them in a database file; here the newest ``KEPT_LOCAL_RUNS`` live as long as the process).
_LOCAL_RUNS: dict[str, LocalExecution] = {}


def created_run(
    workflow_name: str,
    workflow_id: str | None = None,
    workflow_namespace: str | None = None,
    input: Any = None,
    execution_id: str | None = None,
    **ignored: Any,
) -> LocalExecution:
    """flux-core's ``ExecutionContext(workflow_id=..., ...)``: a run of this process not yet
    started (SCHEDULED), which ``Workflow.run(execution_id=...)`` starts unless it was cancelled.
    flux-core's other arguments (``state``, ``events``, ``requests``...) are not taken over."""
    if ignored:
        fluxcore.differs(
            "ExecutionContext(" + ", ".join(f"{key}=" for key in sorted(ignored)) + ")",
            "a run not yet started is built from its workflow name, namespace, input and id only",
        )
    run = LocalExecution(
        execution_id or uuid.uuid4().hex,
        ExecutionState.SCHEDULED,
        None,
        workflow_name=workflow_name,
        input=input,
        namespace=workflow_namespace,
        given_workflow_id=workflow_id,
    )
    return run


ExecutionContext.flux_core_run = staticmethod(created_run)


def local_run(execution_id: str) -> LocalExecution:
    """A local run of this process by id (``KeyError`` naming it otherwise)."""
    run = _LOCAL_RUNS.get(execution_id)
    if run is None:
        raise KeyError(f"no local run {execution_id!r} in this process (local runs are kept in memory)")
    return run


#: Local runs kept: the newest, so a long-lived process (a notebook, a test session) stays bounded.
KEPT_LOCAL_RUNS = 1000


def keep_local_run(run: LocalExecution) -> None:
    _LOCAL_RUNS.pop(run.execution_id, None)
    _LOCAL_RUNS[run.execution_id] = run
    while len(_LOCAL_RUNS) > KEPT_LOCAL_RUNS:
        del _LOCAL_RUNS[next(iter(_LOCAL_RUNS))]


#: flux-core's name, kept for code that imported it from here.
validate_affinity = normalise_affinity


class Workflow:
    """A decorated workflow: its function and its ``WorkflowOptions`` (``options``)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        options: Mapping[str, Any] | None = None,
        output_storage: Any = None,
    ):
        """``options``: the decorator's keyword arguments, validated here (``WorkflowOptions.of``)."""
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@workflow needs an 'async def' function taking ctx, got {fn!r}")
        self.fn = fn
        self.options = WorkflowOptions.of(fn.__name__ if name is None else name, **(options or {}))
        #: flux-core's ``output_storage``: keeps the output; the execution's output is its reference.
        self.output_storage = output_storage
        functools.update_wrapper(self, fn)  # __module__, __doc__, __wrapped__: the function's

    def __getattr__(self, option: str) -> Any:
        """``train.requests``, ``train.timeout``...: its options, read from ``options``."""
        if option in OPTIONS:
            return getattr(self.options, option)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {option!r}")

    def metadata(self) -> dict:
        """What the server stores beside the source (``WorkflowOptions.metadata``)."""
        return self.options.metadata()

    def run(
        self,
        input: Any = None,
        secrets: Mapping[str, str] | None = None,
        execution_id: str | None = None,
        resume_payload: Any = None,
        *,
        gang: Gang | Mapping[str, Any] | None = None,
    ) -> LocalExecution:
        """Run in this process, without a server (tests, notebooks). ``secrets``: what
        tasks with ``secret_requests`` receive (masked in the events, as on a worker).
        ``execution_id`` (and ``resume_payload``): flux-core's form of ``resume(execution_id, value)``.
        A gang (the workflow's, or ``gang``: a ``Gang`` or ``{"size": N}``) runs its members
        as processes of this machine (``flux.model.gang_local``): the output is rank 0's."""
        if execution_id is not None:
            if resume_payload is not None:
                fluxcore.differs(
                    "run(execution_id=, resume_payload=)",
                    "the pause returns the payload (flux-core 0.87.5 ignored it: its pause returned None)",
                )
            return self.resume(execution_id, resume_payload)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop: run one (outside this handler, so a failure's traceback is only its own)
            pass
        else:
            raise RuntimeError(
                f"{self.name}.run() called inside a running event loop; use 'await {self.name}.run_async(...)'"
            )
        return asyncio.run(self.run_async(input, secrets, gang=gang))

    def resume(self, execution_id: str, input: Any = None) -> LocalExecution:
        """Continue this process's local run ``execution_id``: a paused one goes on with
        ``input`` as its pause's value; one that ended is returned as it is (flux-core's ``resume``)."""
        run = local_run(execution_id)
        if run.state is ExecutionState.SCHEDULED:  # flux-core's ExecutionContext(...) saved before it ran
            return asyncio.run(self.run_async(run.input, execution_id=run.execution_id))
        if not run.is_paused:
            return run
        return run.resume(run.resume_with if input is None else input)

    async def run_async(
        self,
        input: Any = None,
        secrets: Mapping[str, str] | None = None,
        execution_id: str | None = None,
        *,
        gang: Gang | Mapping[str, Any] | None = None,
        member: GangContext | None = None,
    ) -> LocalExecution:
        """Run in this process; durable waits are played as the server would
        (``flux.model.waits.run_local``): a long sleep is slept, a call runs its child here.
        ``secrets``: what tasks with ``secret_requests`` receive, redacted from the events.
        A gang runs as local processes (``run``); ``member``: this process is that member
        of one (its ``ctx.gang``)."""
        chosen = None if member is not None else chosen_gang(self.options.gang, gang)
        if chosen is not None:
            return await self._run_gang(input, secrets, execution_id, chosen)
        execution_id, events, completed = execution_id or uuid.uuid4().hex, [], {}
        secrets = {**fluxcore.LOCAL_SECRETS, **(secrets or {})}
        redactor = Redactor()
        redactor.add((secrets or {}).values())

        def context(attempt: int) -> ExecutionContext:
            return ExecutionContext(
                execution_id=execution_id,
                workflow_name=self.name,
                input=input,
                attempt=attempt,
                completed_tasks=completed,
                emit=lambda event: events.append(Event(redactor.redact(event))),
                secrets=dict(secrets or {}),
                gang=member,
            )

        deadline = None if self.timeout is None else time.time() + self.timeout  # from submission, as on a server

        async def attempts(attempt: int = 1, done: tuple[dict, Any] | None = None) -> LocalExecution:
            token = codecs.enable_locally(LOCAL_CODECS)  # this process pickles and reads back: its own values
            try:
                state, value, last = await run_local(self, context, attempt, deadline, done)
                if state is not ExecutionState.PAUSED:  # the output as its body returned it
                    value = codecs.decode(redactor.redact(value))
                if state is ExecutionState.COMPLETED and self.output_storage is not None:
                    value = OutputStorageReference.of(value)  # flux-core's output: the reference object
            finally:
                codecs.reset_local(token)
            if state is ExecutionState.PAUSED:
                run = LocalExecution(
                    execution_id,
                    state,
                    None,
                    events,
                    value,
                    lambda given: attempts(last + 1, (value, given)),
                    self.name,
                    input,
                    namespace=self.namespace,
                )
            else:
                run = LocalExecution(
                    execution_id, state, value, events, workflow_name=self.name, input=input, namespace=self.namespace
                )
            keep_local_run(run)
            return run

        return await attempts()

    async def _run_gang(
        self, input: Any, secrets: Mapping[str, str] | None, execution_id: str | None, gang: Gang
    ) -> LocalExecution:
        state, output, events = await asyncio.to_thread(run_gang, self, input, gang, secrets)
        run = LocalExecution(
            execution_id or uuid.uuid4().hex,
            state,
            output,
            [Event(event) for event in events],
            workflow_name=self.name,
            input=input,
            namespace=self.namespace,
        )
        keep_local_run(run)
        return run

    def __repr__(self) -> str:
        return f"<workflow {self.name}>"


class _WorkflowDecorator:
    """``@workflow`` and ``@workflow.with_options(...)``."""

    def __call__(self, fn: Callable[..., Any]) -> Workflow:
        return Workflow(fn)

    def with_options(
        self,
        name: str | None = None,
        *,
        output_storage: Any = None,
        runner: str | None = None,
        durability: str = "durable",
        **options: Any,
    ) -> Callable[[Callable[..., Any]], Workflow]:
        """Options for the decorated workflow (``flux.domain.workflow_options.WorkflowOptions``
        says each), validated when the decorator runs.

        ``affinity`` is hard (label equality or operators such as ``In``, ``Gt``);
        ``routing=score(...)`` ranks the eligible workers (soft); ``pending_timeout``
        fails an execution that waited that many seconds in SCHEDULED (default: wait
        forever, as the spec says); ``max_attempts`` bounds the attempts that may end
        in a crash (a child killed, a memory ceiling, a worker lost) before the
        execution fails (default: the server's, 3; see docs/attempts.md); ``timeout``
        ends the execution TIMED_OUT that many seconds after submission, across attempts
        and waits (docs/waits.md). ``priority`` (a class name such as ``"high"`` or an
        int), ``preemptible``, ``concurrency=Concurrency(key=..., limit=...)`` and
        ``max_concurrency`` decide who gets a contended fleet (docs/contention.md), and
        ``min_runtime`` (seconds or ``"10m"``): an attempt younger than that is preempted
        only when nothing else makes room. ``namespace``, ``schedule`` and ``output_storage`` are
        flux-core's (docs/migrating-from-flux-core.md), and so are ``runner`` and
        ``durability``, accepted with a ``MigrationWarning``: here the worker's runner runs
        every execution, and every execution is durable.
        """
        fluxcore.flux_core_placement(runner, durability)
        for policy in ("affinity", "routing"):
            if policy in options:
                options[policy] = fluxcore.local_only(options[policy])

        def decorate(fn: Callable[..., Any]) -> Workflow:
            return Workflow(fn, name, options, output_storage)

        return decorate


workflow = _WorkflowDecorator()
