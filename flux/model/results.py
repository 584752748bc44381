"""A run's result read the way flux-core's code reads its ``ExecutionContext`` after
``run()``: ``has_succeeded``, ``has_failed``, ``is_paused``, ``to_json()``... over our
state and output, so a migrated script's last lines run unchanged
(docs/migrating-from-flux-core.md)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from flux.domain.events import EventType, ExecutionState, make_event
from flux.model import codecs
from flux.model.calls import describe_error
from flux.model.runtime import TaskFailedError, failure_kind, plain, raised_in
from flux.output_storage import OutputStorageReference

#: The worker flux-core's local resume named (``WorkerInfo(name="local")``).
LOCAL_WORKER = "local"


class ExecutionError(TaskFailedError):
    """flux-core's ``ExecutionError`` as a failed local run's ``output``: what the task's body
    raised is its ``inner_exception``. A ``TaskFailedError`` (``flux.errors.ExecutionError``), so
    code that tests the output's type as flux-core's did runs unchanged; built for the output
    only: the workflow's own ``except`` sees the ``TaskFailedError`` the task raised."""


def flux_core_failure(raised: BaseException, message: str | None) -> BaseException:
    """What flux-core's ``ctx.output`` was for a run that ``raised`` this: the exception the
    workflow's body raised, a task's failure as ``ExecutionError`` around what its body raised
    (a timeout or a refused approval as itself). ``message``: the recorded one, secrets masked;
    where it differs from the exception's own, a copy carrying the recorded one."""
    inner = raised
    while isinstance(inner, TaskFailedError) and inner.__cause__ is not None:
        inner = inner.__cause__
    if message is not None and str(inner) != message:
        inner = _masked(inner, message)
    if not isinstance(raised, TaskFailedError) or isinstance(inner, TimeoutError):
        return inner  # raised by the body itself, or a task's timeout (flux-core's is an ExecutionError)
    return ExecutionError(inner)


def _masked(exc: BaseException, message: str) -> BaseException:
    """``exc``'s type with the recorded message (a secret masked), never the original text."""
    try:
        copy = type(exc).__new__(type(exc), message)
        copy.args = (message,)
        return copy
    except Exception:  # noqa: BLE001 - a type that cannot be built bare: the message still matters
        return RuntimeError(message)


class Event(dict):
    """An event of a local run: the dict every API shows, readable as flux-core's event
    objects are (``event.type``, ``event.value``). A pause's ``event.value`` is flux-core's
    ``{"name", "output"}``; ``event["value"]`` stays the recorded ``{"kind", "id", "name", "payload"}``."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        if name == "value" and self.get("type") == "WORKFLOW_SUSPENDED" and _is_pause(value):
            return paused_value(value)
        return value


def _is_pause(value: Any) -> bool:
    return isinstance(value, dict) and value.get("kind") == "pause"


def paused_value(wait: dict) -> dict[str, Any]:
    """A pause as flux-core showed it: its name (as the code gave it) and its output."""
    payload = wait.get("payload")
    if isinstance(payload, dict) and set(payload) == {"name", "output"} and str(payload["name"]) != wait.get("name"):
        return dict(payload)  # a flux-core name this engine renamed (flux.tasks.pause)
    return {"name": wait.get("name"), "output": payload}


def _shown(value: Any) -> Any:
    """How ``to_json()`` shows a value JSON lacks: a date or a duration as flux-core's
    ``to_json()`` did, anything else as the envelope the log records (``flux.model.codecs``)."""
    try:
        return plain(value)
    except TypeError:
        pass
    if isinstance(value, OutputStorageReference):
        return value.to_dict()
    if isinstance(value, BaseException):
        return failure_kind(value)  # a failed run's output passed on (as input): flux-core showed its type, message
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return str(value)  # a numpy number as flux-core's to_json() printed it
    try:
        return codecs.encoder(frozenset(codecs.BY_NAME))(value)
    except Exception:  # noqa: BLE001 - shown, never recorded: its repr rather than no answer
        return repr(value)


class RunResult:
    """Mixed into ``LocalExecution``: it has ``execution_id``, ``workflow_name``,
    ``input``, ``state``, ``output``, ``events`` and ``wait``."""

    execution_id: str
    workflow_name: str
    input: Any
    state: ExecutionState
    output: Any
    events: list[dict]
    wait: dict | None
    resume_with: Any
    #: A failed or timed-out run's failure as the log records it (the WORKFLOW_FAILED event's value,
    #: as on a server): ``{"error", "type", "message", "traceback", "failure"}``; None otherwise.
    failure: dict | None = None

    def __post_init__(self) -> None:
        """A failed run's ``output`` is the exception, as flux-core's was (``flux_core_failure``);
        what the log recorded, JSON, is ``failure``. A workflow timeout (no flux-core counterpart)
        keeps its recorded dict as its output too."""
        self.failure = None
        if self.state is ExecutionState.TIMED_OUT:
            self.failure = self.output if isinstance(self.output, dict) else {"error": str(self.output)}
        elif self.state is ExecutionState.FAILED and isinstance(self.output, BaseException):
            self.failure = {"error": describe_error(self.output), **failure_kind(self.output)}  # told by a process
        elif self.state is ExecutionState.FAILED:
            recorded = self.output if isinstance(self.output, dict) else {"error": str(self.output)}
            raised = raised_in(self.execution_id)
            text = recorded.get("message", recorded.get("error"))
            self.failure = recorded
            self.output = ExecutionError(None, text) if raised is None else flux_core_failure(raised, text)

    @property
    def has_finished(self) -> bool:
        return self.state.is_terminal

    @property
    def has_succeeded(self) -> bool:
        return self.state is ExecutionState.COMPLETED

    @property
    def has_failed(self) -> bool:
        return self.state in (ExecutionState.FAILED, ExecutionState.TIMED_OUT)

    @property
    def is_paused(self) -> bool:
        return self.state is ExecutionState.PAUSED

    @property
    def is_cancelled(self) -> bool:
        return self.state is ExecutionState.CANCELLED

    @property
    def has_started(self) -> bool:
        return bool(self.events)

    def to_dict(self) -> dict[str, Any]:
        """flux-core's shape: ids, input, output, state and the events; a paused run's
        output is its pause (``{"name", "output"}``) and a failed run's its exception's
        ``{"type", "message"}``, as flux-core showed them."""
        return json.loads(
            json.dumps(
                {
                    "workflow_id": self.workflow_id,
                    "workflow_namespace": self.workflow_namespace,
                    "workflow_name": self.workflow_name,
                    "execution_id": self.execution_id,
                    "input": self.input,
                    "output": self._shown_output(),
                    "state": self.state.value,
                    "current_worker": self.current_worker,
                    "events": self.events,
                },
                default=_shown,
            )
        )

    def _shown_output(self) -> Any:
        """A paused run's output is its pause; a failed run's, the ``{"type", "message"}``
        flux-core's ``to_json()`` printed for its exception (the whole record is ``failure``)."""
        if self.is_paused:
            return self.paused_output()
        if self.failure is not None and {"type", "message"} <= self.failure.keys():
            return {"type": self.failure["type"], "message": self.failure["message"]}
        return self.failure if self.failure is not None else self.output

    @property
    def workflow_id(self) -> str:
        """flux-core's id of the workflow (a hex id): here derived from its namespace and name."""
        given = getattr(self, "given_workflow_id", None)
        return given or uuid.uuid5(uuid.NAMESPACE_URL, f"flux:{self.workflow_namespace}/{self.workflow_name}").hex

    @property
    def workflow_namespace(self) -> str:
        return getattr(self, "namespace", None) or "default"

    @property
    def current_worker(self) -> str:
        """The worker running it: none for a run of this process (flux-core's ``""``), and
        flux-core's ``"local"`` once a pause of it was resumed here (its local resume claimed
        the run for a worker of that name, which its ``to_json()`` then showed)."""
        return LOCAL_WORKER if self._resumed_here() else ""

    def _resumed_here(self) -> bool:
        return any(
            event.get("type") == EventType.WAIT_COMPLETED and str(event.get("task_id") or "").startswith("pause:")
            for event in self.events
        )

    def cancel(self) -> "RunResult":
        """flux-core's ``ctx.cancel()`` of a run not yet started (``ExecutionContext(...)``) or
        paused: it ends CANCELLED, and ``run(execution_id=...)`` returns it as it is."""
        if self.state.is_terminal:
            return self
        self.events.append(
            Event(make_event(EventType.WORKFLOW_CANCELLED, self.workflow_name, value={"reason": "cancelled"}))
        )
        self.state = ExecutionState.CANCELLED
        self.wait = None
        return self

    def summary(self) -> dict[str, Any]:
        return {key: value for key, value in self.to_dict().items() if key != "events"}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=4)

    def start_resuming(self, input: Any = None) -> "RunResult":
        """flux-core's way to give a paused run its resume value before ``run(execution_id=...)``."""
        self.resume_with = input
        return self

    def paused_output(self) -> dict[str, Any] | None:
        return paused_value(self.wait) if self.wait else None
