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

from flux.domain.affinity import Operator, normalise_affinity
from flux.domain.attempts import check_max_attempts
from flux.domain.concurrency import Concurrency, check_concurrency, check_limit
from flux.domain.declared_schedules import DeclaredSchedule
from flux.domain.durations import parse_duration
from flux.domain.events import ExecutionState
from flux.domain.names import check_name
from flux.domain.namespaces import check_namespace
from flux.domain.priority import check_priority
from flux.domain.resource_request import ResourceRequest, request_or_none
from flux.domain.routing import LabelRef, RoutingPolicy, Term
from flux.domain.secrets import Redactor
from flux.domain.waits import check_timeout
from flux.model import codecs, fluxcore
from flux.model.results import Event, RunResult
from flux.model.runtime import ExecutionContext
from flux.model.waits import run_local
from flux.output_storage import OutputStorageReference
from flux.routing import Unmapped


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


def validate_affinity(affinity: Any, owner: str) -> dict[str, str | dict] | None:
    """The affinity's JSON form, or ``None`` when empty; ``ValueError`` names owner, key and value.

    Kept under this name for the server, which re-validates API payloads with it; it is
    ``flux.domain.affinity.normalise_affinity``.
    """
    return normalise_affinity(affinity, owner)


def validate_routing(routing: Any, owner: str) -> RoutingPolicy | None:
    """A ``score(...)`` policy, or its JSON form (``{"terms": [...]}``), as a RoutingPolicy.

    ``ValueError`` names ``owner`` and what is wrong.
    """
    if routing is None or isinstance(routing, RoutingPolicy):
        return routing
    if isinstance(routing, Mapping):
        try:
            return RoutingPolicy.from_dict(routing)
        except ValueError as exc:
            raise ValueError(f"{owner}: {exc}") from None
    if isinstance(routing, (Term, LabelRef)):
        raise ValueError(
            f"{owner}: routing must be score(...), got a bare term {routing!r}; wrap it: score({routing!r})"
        )
    raise ValueError(f"{owner}: routing must be score(...), got {routing!r}")


def _validate_requests(requests: Any, owner: str) -> ResourceRequest | None:
    if requests is not None and not isinstance(requests, (Mapping, ResourceRequest)):
        raise ValueError(f"{owner}: requests must be a ResourceRequest, got {requests!r}")
    return request_or_none(requests)


@dataclass(frozen=True)
class WorkflowOptions:
    """A workflow's validated options: what ``@workflow.with_options`` and static
    registration (``flux.registration``) both build, through ``workflow_options``."""

    name: str
    requests: ResourceRequest | None = None
    affinity: dict | None = None
    routing: RoutingPolicy | None = None
    pending_timeout: float | None = None
    max_attempts: int | None = None
    #: Seconds from submission, across attempts and waits, before it ends TIMED_OUT.
    timeout: float | None = None
    #: A priority class's name or an int (docs/contention.md); ``None``: the server's default class.
    priority: int | str | None = None
    #: False: never chosen as a victim of preemption.
    preemptible: bool = True
    #: Seconds of an attempt in which it is chosen as a victim only when nothing else would do.
    min_runtime: float | None = None
    #: At most ``limit`` executions with the rendered key hold a worker at once.
    concurrency: Concurrency | None = None
    #: At most this many executions of this workflow hold a worker at once.
    max_concurrency: int | None = None
    #: The namespace the workflow belongs in: registering it into another is refused.
    namespace: str | None = None
    #: A schedule declared in code: registration creates (or updates) the server schedule ``<name>``.
    schedule: DeclaredSchedule | None = None

    def metadata(self) -> dict:
        """What the server stores beside the source: name, placement constraints and routing.

        ``"routing"`` and ``"pending_timeout"`` are present only when set, so
        workflows without them register exactly as before.
        """
        metadata = {
            "name": self.name,
            "requests": self.requests.to_dict() if self.requests else None,
            "affinity": self.affinity,
        }
        if self.routing is not None:
            metadata["routing"] = self.routing.to_dict()
        if self.pending_timeout is not None:
            metadata["pending_timeout"] = self.pending_timeout
        if self.max_attempts is not None:
            metadata["max_attempts"] = self.max_attempts
        if self.timeout is not None:
            metadata["timeout"] = self.timeout
        if self.namespace is not None:
            metadata["namespace"] = self.namespace
        if self.schedule is not None:
            metadata["schedule"] = self.schedule.request()
        metadata.update(self.contention())
        return metadata

    def contention(self) -> dict:
        """The options that decide who gets a contended worker, only those set
        (stored as the workflow's ``contention``; docs/contention.md)."""
        options: dict = {}
        if self.priority is not None:
            options["priority"] = self.priority
        if not self.preemptible:
            options["preemptible"] = False
        if self.min_runtime is not None:
            options["min_runtime"] = self.min_runtime
        if self.concurrency is not None:
            options["concurrency"] = self.concurrency.to_json()
        if self.max_concurrency is not None:
            options["max_concurrency"] = self.max_concurrency
        return options


def workflow_options(
    name: str,
    requests: Any = None,
    affinity: Any = None,
    routing: Any = None,
    pending_timeout: Any = None,
    max_attempts: Any = None,
    timeout: Any = None,
    priority: Any = None,
    preemptible: Any = True,
    concurrency: Any = None,
    max_concurrency: Any = None,
    namespace: Any = None,
    schedule: Any = None,
    min_runtime: Any = None,
) -> WorkflowOptions:
    """Validate a workflow's options; ``ValueError`` (or ``InvalidResourceRequest``) names the field.

    The one implementation of the rules: the decorator calls it when it runs, static
    registration when it reads the decorator's arguments from the source."""
    name = check_name(name)
    owner = f"workflow {name!r}"
    for policy in (affinity, routing):
        if isinstance(policy, Unmapped):  # flux-core's input-resolved routing: never registered
            raise ValueError(f"{owner}: {policy.message()}")
    request = _validate_requests(requests, owner)
    affinity = validate_affinity(affinity, owner)
    routing = validate_routing(routing, owner)
    if pending_timeout is not None and (
        not isinstance(pending_timeout, (int, float)) or isinstance(pending_timeout, bool) or pending_timeout <= 0
    ):
        raise ValueError(f"{owner}: pending_timeout must be a number of seconds > 0, got {pending_timeout!r}")
    if not isinstance(preemptible, bool):
        raise ValueError(f"{owner}: preemptible must be True or False, got {preemptible!r}")
    if schedule is not None and not isinstance(schedule, DeclaredSchedule):
        raise ValueError(f"{owner}: schedule must be cron(...), interval(...) or once(...), got {schedule!r}")
    return WorkflowOptions(
        name,
        request,
        affinity,
        routing,
        pending_timeout,
        check_max_attempts(max_attempts, owner),
        check_timeout(timeout, owner),
        priority=check_priority(priority, owner),
        preemptible=preemptible,
        concurrency=check_concurrency(concurrency, owner),
        max_concurrency=None if max_concurrency is None else check_limit(max_concurrency, f"{owner}: max_concurrency"),
        namespace=None if namespace is None else _namespace(namespace, owner),
        schedule=schedule,
        min_runtime=None if min_runtime is None else parse_duration(min_runtime, f"{owner}: min_runtime"),
    )


def _namespace(namespace: Any, owner: str) -> str:
    try:
        return check_namespace(namespace)
    except ValueError as exc:
        raise ValueError(f"{owner}: namespace: {exc}") from None


class Workflow:
    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        requests: ResourceRequest | Mapping | None = None,
        affinity: Mapping[str, str | Operator | Mapping] | None = None,
        routing: RoutingPolicy | Mapping | None = None,
        pending_timeout: float | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        priority: int | str | None = None,
        preemptible: bool = True,
        concurrency: Concurrency | None = None,
        max_concurrency: int | None = None,
        namespace: str | None = None,
        schedule: DeclaredSchedule | None = None,
        output_storage: Any = None,
        min_runtime: float | str | None = None,
    ):
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@workflow needs an 'async def' function taking ctx, got {fn!r}")
        self.fn = fn
        affinity, routing = fluxcore.local_only(affinity), fluxcore.local_only(routing)
        self.options = workflow_options(
            fn.__name__ if name is None else name,
            requests,
            affinity,
            routing,
            pending_timeout,
            max_attempts,
            timeout,
            priority,
            preemptible,
            concurrency,
            max_concurrency,
            namespace,
            schedule,
            min_runtime=min_runtime,
        )
        #: flux-core's ``output_storage``: keeps the output; the execution's output is its reference.
        self.output_storage = output_storage
        self.name = self.options.name
        self.requests = self.options.requests
        self.affinity = self.options.affinity
        self.routing = self.options.routing
        self.pending_timeout = self.options.pending_timeout
        self.max_attempts = self.options.max_attempts
        self.timeout = self.options.timeout
        self.namespace = self.options.namespace
        self.schedule = self.options.schedule
        functools.update_wrapper(self, fn)  # __module__, __doc__, __wrapped__: the function's

    def metadata(self) -> dict:
        """What the server stores beside the source (``WorkflowOptions.metadata``)."""
        return self.options.metadata()

    def run(
        self,
        input: Any = None,
        secrets: Mapping[str, str] | None = None,
        execution_id: str | None = None,
        resume_payload: Any = None,
    ) -> LocalExecution:
        """Run in this process, without a server (tests, notebooks). ``secrets``: what
        tasks with ``secret_requests`` receive (masked in the events, as on a worker).
        ``execution_id`` (and ``resume_payload``): flux-core's form of ``resume(execution_id, value)``."""
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
        return asyncio.run(self.run_async(input, secrets))

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
        self, input: Any = None, secrets: Mapping[str, str] | None = None, execution_id: str | None = None
    ) -> LocalExecution:
        """Run in this process; durable waits are played as the server would
        (``flux.model.waits.run_local``): a long sleep is slept, a call runs its child here.
        ``secrets``: what tasks with ``secret_requests`` receive, redacted from the events."""
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

    def __repr__(self) -> str:
        return f"<workflow {self.name}>"


class _WorkflowDecorator:
    """``@workflow`` and ``@workflow.with_options(...)``."""

    def __call__(self, fn: Callable[..., Any]) -> Workflow:
        return Workflow(fn)

    def with_options(
        self,
        name: str | None = None,
        requests: ResourceRequest | Mapping | None = None,
        affinity: Mapping[str, str | Operator | Mapping] | None = None,
        routing: RoutingPolicy | Mapping | None = None,
        pending_timeout: float | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        priority: int | str | None = None,
        preemptible: bool = True,
        concurrency: Concurrency | None = None,
        max_concurrency: int | None = None,
        namespace: str | None = None,
        schedule: DeclaredSchedule | None = None,
        output_storage: Any = None,
        runner: str | None = None,
        durability: str = "durable",
        min_runtime: float | str | None = None,
    ) -> Callable[[Callable[..., Any]], Workflow]:
        """Options for the decorated workflow, validated when the decorator runs.

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

        def decorate(fn: Callable[..., Any]) -> Workflow:
            return Workflow(
                fn,
                name=name,
                requests=requests,
                affinity=affinity,
                routing=routing,
                pending_timeout=pending_timeout,
                max_attempts=max_attempts,
                timeout=timeout,
                priority=priority,
                preemptible=preemptible,
                concurrency=concurrency,
                max_concurrency=max_concurrency,
                namespace=namespace,
                schedule=schedule,
                output_storage=output_storage,
                min_runtime=min_runtime,
            )

        return decorate


workflow = _WorkflowDecorator()
