"""What ``flux.Client`` returns: typed values, not dicts. Each is the API's JSON as a
pydantic model that ignores fields it does not know (a newer server may add some),
with the states as ``ExecutionState`` and a failure as ``flux.protocol.Failure``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from flux.domain.events import ExecutionState
from flux.protocol.failures import Failure


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class GangMemberInfo(_Reply):
    """One member of a gang, as its gang's ``GET /executions/ID`` lists it (docs/gangs.md)."""

    rank: int
    id: str
    worker_name: str | None = None
    attempt: int = 0
    state: ExecutionState
    started_at: float | None = None
    finished_at: float | None = None


class Execution(_Reply):
    """One execution as the server has it now (``GET /executions/ID``)."""

    id: str
    namespace: str = "default"
    workflow_name: str
    workflow_version: int
    state: ExecutionState
    input: Any = None
    output: Any = None
    error: str | None = None
    failure: Failure | None = None
    worker_name: str | None = None
    attempt: int = 0
    max_attempts: int = 0
    crashes: int = 0
    scheduled_at: float
    claimed_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    schedule: str | None = None
    parent: str | None = None
    children: list[str] | None = None
    deadline: float | None = None
    #: A gang's own execution: its shape (``Gang.to_dict()``) and its members by rank.
    gang: dict[str, Any] | None = None
    members: list[GangMemberInfo] | None = None
    #: A gang member's: its gang and rank.
    gang_id: str | None = None
    rank: int | None = None

    @property
    def ended(self) -> bool:
        return self.state.is_terminal


class Event(_Reply):
    """One entry of an execution's event log."""

    seq: int
    type: str
    name: str | None = None
    task_id: str | None = None
    value: Any = None
    time: float
    worker_name: str | None = None

    @property
    def failure(self) -> Failure | None:
        """What a ``TASK_FAILED`` or ``WORKFLOW_FAILED`` carries (docs/failures.md)."""
        return Failure.parsed(self.value)


class LogLine(_Reply):
    """One captured line of an attempt (docs/logs.md)."""

    seq: int
    attempt: int
    time: float
    stream: str
    task_id: str | None = None
    level: str | None = None
    logger: str | None = None
    message: str
