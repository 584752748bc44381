"""A run's result read the way flux-core's code reads its ``ExecutionContext`` after
``run()``: ``has_succeeded``, ``has_failed``, ``is_paused``, ``to_json()``... over our
state and output, so a migrated script's last lines run unchanged
(docs/migrating-from-flux-core.md)."""

from __future__ import annotations

import json
from typing import Any

from flux.domain.events import ExecutionState
from flux.model.fluxcore import differs
from flux.model.runtime import plain

FAILED_OUTPUT = (
    "a failed run's output is a dict {error, type, message, traceback} here (flux-core's type and "
    "message of the innermost exception, plus ours); flux-core's was the exception object"
)


class Event(dict):
    """An event of a local run: the dict every API shows, readable as flux-core's event
    objects are (``event.type``, ``event.value``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


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

    @property
    def has_finished(self) -> bool:
        return self.state.is_terminal

    @property
    def has_succeeded(self) -> bool:
        return self.state is ExecutionState.COMPLETED

    @property
    def has_failed(self) -> bool:
        return self._failure_read()

    def _failure_read(self) -> bool:
        """Whether the run failed; flux-core code reading a failure is told, once, what its output is here."""
        failed = self.state in (ExecutionState.FAILED, ExecutionState.TIMED_OUT)
        if failed:
            differs("the output of a failed run", FAILED_OUTPUT)
        return failed

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
        output is its pause (``{"name", "output"}``), as flux-core showed it."""
        self._failure_read()
        return json.loads(
            json.dumps(
                {
                    "workflow_name": self.workflow_name,
                    "execution_id": self.execution_id,
                    "input": self.input,
                    "output": self.paused_output() if self.is_paused else self.output,
                    "state": self.state.value,
                    "events": self.events,
                },
                default=plain,
            )
        )

    def summary(self) -> dict[str, Any]:
        return {key: value for key, value in self.to_dict().items() if key != "events"}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=4)

    def start_resuming(self, input: Any = None) -> "RunResult":
        """flux-core's way to give a paused run its resume value before ``run(execution_id=...)``."""
        self.resume_with = input
        return self

    def paused_output(self) -> dict[str, Any] | None:
        wait = self.wait or {}
        return {"name": wait.get("name"), "output": wait.get("payload")} if wait else None
