"""Pydantic models of the HTTP API: what FastAPI validates and what /docs shows."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer

from flux.domain.events import EVENT_TYPE_MAX, MAX_CHECKPOINT_EVENTS, TASK_ID_MAX, EventType, ExecutionState
from flux.domain.names import NAME_MAX, NAME_PATTERN, check_name
from flux.domain.secrets import MAX_SECRET_LENGTH
from flux.domain.resource_request import InvalidResourceRequest, parse_custom_resources
from flux.domain.samples import probed_problem
from flux.domain.workers import AllocationMode


class Strict(BaseModel):
    """Request bodies: unknown fields are refused, and so are coercions such as
    ``true`` or ``"4"`` for a number (an integer is still a valid float)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# --- errors ----------------------------------------------------------------------------


class ErrorItem(BaseModel):
    loc: list[str | int] = Field(description="Where: 'body', 'query' or 'path', then the field path")
    msg: str


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer (see docs/security.md)."""

    detail: str = Field(description="Human-readable reason")
    code: str = Field(description="not_found, unauthorized, forbidden, conflict, invalid, payload_too_large, validation_error, ...")
    errors: list[ErrorItem] | None = Field(default=None, description="Field errors; only for validation_error")


# --- workflows -------------------------------------------------------------------------


#: A label value (equality) or an operator such as {"op": "In", "values": [...]}.
AffinityJSON = dict[str, str | dict[str, Any]]
#: A number as it was given: 4 stays 4, 0.5 stays 0.5 (never 4.0 in the JSON).
Number = int | float


class RequestsJSON(BaseModel):
    """A stored ResourceRequest (``ResourceRequest.to_dict``): only the fields that are set."""

    cpu: Number | None = None
    memory: int | None = Field(default=None, description="Bytes")
    disk: int | None = Field(default=None, description="Bytes")
    gpu: int | None = None
    packages: list[str] | None = Field(default=None, description="PEP 508 requirements, e.g. 'torch>=2.0'")
    resources: dict[str, Number] | None = Field(default=None, description="Countable custom resources, e.g. {'fpga': 1}")

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler):  # noqa: ANN001, ANN202
        return {name: value for name, value in handler(self).items() if value is not None}


class RoutingJSON(BaseModel):
    """A routing policy (``flux.domain.routing.RoutingPolicy.to_dict``): weighted terms."""

    model_config = ConfigDict(extra="allow")
    terms: list[dict[str, Any]] = Field(description="Each {'kind': 'label'|'metric'|'load', 'weight': ..., ...}")


class WorkflowSpec(Strict):
    name: str = Field(json_schema_extra={"pattern": NAME_PATTERN}, description="1-128 of A-Z a-z 0-9 _ - . ; not starting with .")
    requests: dict[str, Any] | None = None
    affinity: AffinityJSON | None = None
    routing: dict[str, Any] | None = None
    pending_timeout: float | None = Field(default=None, gt=0)
    max_attempts: int | None = Field(default=None, ge=1, le=1000, description="Attempts that may crash before it fails; null: the server's default")
    timeout: float | None = Field(default=None, gt=0, le=1e10, description="Seconds from submission before it ends TIMED_OUT")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_name(value)


class WorkflowRegistration(Strict):
    source: str = Field(min_length=1, description="Python source of the workflow module")
    filename: str = Field(default="workflow.py", max_length=255)
    workflows: list[WorkflowSpec] = Field(min_length=1, description="What the client read from the module")


SHA256_PATTERN = "^[0-9a-f]{64}$"


class BundleRegistration(Strict):
    bundle: str = Field(pattern=SHA256_PATTERN, description="The sha256 of a bundle uploaded with POST /bundles")
    requirements: bool = Field(
        default=True, description="Turn the bundle's requirements (requirements.txt, pyproject.toml) into package constraints"
    )


class BundleInfo(BaseModel):
    sha256: str
    size: int = Field(description="Bytes, zipped")
    files: int


class WorkflowInfo(BaseModel):
    name: str
    version: int
    filename: str
    requests: RequestsJSON | None
    affinity: AffinityJSON | None
    routing: RoutingJSON | None
    pending_timeout: float | None
    max_attempts: int | None = None
    timeout: float | None = Field(default=None, description="Seconds from submission before it ends TIMED_OUT")
    created_at: float
    source: str | None = None
    bundle: str | None = Field(default=None, description="The sha256 of the bundle it runs from (docs/bundles.md)")
    module: str | None = Field(default=None, description="The bundle's module that defines it")
    warnings: list[str] = Field(default=[], description="E.g. no registered worker could ever satisfy its request")


class RunRequest(Strict):
    input: Any = None
    version: int | None = Field(default=None, ge=1)


class ResumeRequest(Strict):
    input: Any = Field(default=None, description="What the paused workflow's pause() returns")


class PruneRequest(Strict):
    older_than: float = Field(gt=0, le=1e12, description="Seconds: executions that finished longer ago than this are deleted")


class PruneReply(BaseModel):
    deleted: int = Field(description="Executions deleted, with their events and log lines")


# --- executions ------------------------------------------------------------------------


class EventIn(Strict):
    type: str = Field(max_length=EVENT_TYPE_MAX)
    name: str | None = Field(default=None, max_length=NAME_MAX, description="The workflow's or the task's name")
    task_id: str | None = Field(default=None, max_length=TASK_ID_MAX, description="The task call ('fetch:2') or wait ('pause:approval:1')")
    value: Any = None
    time: float


class EventOut(BaseModel):
    seq: int
    type: EventType
    name: str | None
    task_id: str | None
    value: Any
    time: float
    worker_name: str | None


class WaitInfo(BaseModel):
    """A durable wait (docs/waits.md): only the fields of its kind are present."""

    model_config = ConfigDict(extra="allow")
    kind: Literal["sleep", "pause", "call"]
    id: str = Field(description="Its id in the event log: sleep:1, pause:approval:1, call:1")
    until: float | None = Field(default=None, description="sleep: when it is due")
    name: str | None = Field(default=None, description="pause: its name")
    payload: Any = Field(default=None, description="pause: what the workflow showed whoever resumes it")
    workflow: str | None = Field(default=None, description="call: the child's workflow")
    child: str | None = Field(default=None, description="call: the child execution")

    @model_serializer(mode="wrap")
    def _its_fields_only(self, handler):  # noqa: ANN001, ANN202
        fields = handler(self)
        return {name: value for name, value in fields.items() if value is not None or name in self.model_fields_set}


class ExecutionInfo(BaseModel):
    id: str
    workflow_name: str
    workflow_version: int
    state: ExecutionState
    input: Any = Field(default=None, description="Absent from list items unless asked for (?include=input)")
    output: Any = Field(default=None, description="Absent from list items unless asked for (?include=output)")
    error: str | None
    worker_name: str | None
    attempt: int = Field(description="The current attempt (0 before the first claim); also its fencing token")
    max_attempts: int = Field(description="Attempts that may end in a crash before it fails")
    crashes: int = Field(description="Attempts that ended in a crash so far")
    requests: RequestsJSON | None
    affinity: AffinityJSON | None
    routing: RoutingJSON | None
    unschedulable: str | None
    placement_note: str | None
    scheduled_at: float
    claimed_at: float | None
    started_at: float | None
    finished_at: float | None
    schedule: str | None = Field(default=None, description="The schedule that started it (docs/schedules.md)")
    scheduled_for: float | None = Field(default=None, description="The due time (epoch seconds) its schedule started it for")
    wait: WaitInfo | None = Field(default=None, description="What it waits for while SLEEPING, PAUSED or AWAITING_CHILD")
    parent: str | None = Field(default=None, description="The execution whose call() started it")
    children: list[str] | None = Field(default=None, description="The executions its call()s started (GET /executions/ID only)")
    deadline: float | None = Field(default=None, description="When it ends TIMED_OUT (its workflow's timeout)")


class Checkpoint(Strict):
    attempt: int = Field(ge=1)
    batch: int = Field(ge=1, description="1, 2, 3... within the attempt: a re-sent batch is acknowledged, not appended twice")
    events: list[EventIn] = Field(min_length=1, max_length=MAX_CHECKPOINT_EVENTS, description="At most 1,000 (the worker splits larger batches)")


class CheckpointReply(BaseModel):
    state: str
    cancel: bool


# --- execution logs (docs/logs.md) ------------------------------------------------------

#: Where a line came from: the child's stdout or stderr, a ``logging`` record, or Flux's own note.
LogStream = Literal["stdout", "stderr", "log", "flux"]
#: The ``level`` filter: a minimum, over the standard ``logging`` level names.
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
#: Lines in one batch a worker may post; more is 422 (the worker sends 1,000 at most).
MAX_LOG_LINES = 5000


class LogLineIn(Strict):
    time: float = Field(description="Epoch seconds, taken where the line was written")
    stream: LogStream
    task_id: str | None = Field(default=None, max_length=TASK_ID_MAX, description="The task call ('fetch:2'); null: the workflow body or unknown")
    level: str | None = Field(default=None, description="For 'log' lines: INFO, WARNING, ...; cut to 16 characters")
    logger: str | None = Field(default=None, description="For 'log' lines: the logger's name; cut to 128 characters")
    message: str = Field(description="Longer than 64 KiB (UTF-8): cut, with a note of how much was cut")


class LogBatch(Strict):
    attempt: int = Field(ge=1, description="The attempt that wrote the lines: must be the current one (fencing)")
    batch: int = Field(ge=1, description="1, 2, 3... within the attempt: a re-sent batch is acknowledged, not stored twice")
    lines: list[LogLineIn] = Field(default=[], max_length=MAX_LOG_LINES)
    truncated: bool = Field(default=False, description="The worker dropped lines of this attempt (--max-log-bytes)")


class LogBatchReply(BaseModel):
    accepted: int = Field(description="Lines stored; 0 for a batch already accepted")


class LogLineOut(BaseModel):
    seq: int = Field(description="Monotonic per execution, across attempts; the SSE event id")
    attempt: int
    time: float
    stream: str
    task_id: str | None
    level: str | None
    logger: str | None
    message: str


class LogPage(BaseModel):
    lines: list[LogLineOut]
    next_after: int = Field(description="Pass as 'after' for the next page; when the page is not full, the execution's newest seq")
    truncated: bool = Field(description="Some attempt's worker dropped lines past its --max-log-bytes")


# --- workers ---------------------------------------------------------------------------


class GPUInfo(Strict):
    index: int = Field(ge=0)
    uuid: str
    name: str
    memory_total: int = Field(ge=0)
    memory_available: int = Field(ge=0)
    utilization: float = 0.0


class ResourcesInfo(Strict):
    cpu_total: float = Field(ge=0)
    cpu_available: float = Field(ge=0)
    cpu_percent: float = 0.0
    memory_total: int = Field(ge=0)
    memory_available: int = Field(ge=0)
    disk_total: int = Field(ge=0)
    disk_free: int = Field(ge=0)
    capacity: dict[str, Number] = Field(default={}, description="Probed dimensions beyond cpu, memory and disk: name -> total")
    available: dict[str, Number] = Field(default={}, description="The same dimensions: name -> available now")
    gpus: list[GPUInfo] = []
    sampled_at: str | None = None

    @field_validator("capacity", "available")
    @classmethod
    def _valid_dimensions(cls, value: dict[str, Number]) -> dict[str, Number]:
        problem = probed_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class PackageInfo(Strict):
    name: str
    version: str


class RuntimeInfo(Strict):
    python_version: str
    os_name: str
    os_version: str
    hostname: str
    cpu_arch: str = ""


class WorkerRegistration(Strict):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")
    labels: dict[str, str] = {}
    max_concurrent_executions: int = Field(default=1, ge=1, le=10_000)
    heartbeat_interval: float = Field(default=5.0, gt=0, le=3600)
    allocation: Literal[AllocationMode.SAMPLE.value, AllocationMode.RESERVE.value] = AllocationMode.SAMPLE.value
    custom_resources: dict[str, float] = Field(default={}, description="Countable custom resources, e.g. {'fpga': 2}")
    resources: ResourcesInfo
    packages: list[PackageInfo] = []
    runtime: RuntimeInfo
    running: list[str] = Field(default=[], description="Executions this worker process still runs")
    metrics: dict[str, float] = {}

    @field_validator("custom_resources")
    @classmethod
    def _valid_custom_resources(cls, value: dict[str, float]) -> dict[str, float]:
        try:
            return dict(parse_custom_resources(value, "custom_resources"))
        except InvalidResourceRequest as exc:
            raise ValueError(str(exc)) from None


class RegistrationReply(BaseModel):
    session_token: str
    abandon: list[str] = Field(description="Executions the worker must stop: they are no longer its own")


class Heartbeat(Strict):
    running: list[str] = []
    resources: ResourcesInfo | None = Field(
        default=None, description="A fresh sample, sent when it moved materially (flux.domain.samples); omitted: unchanged"
    )
    metrics: dict[str, float] | None = Field(default=None, description="Live metrics for routing policies; omitted: unchanged")
    draining: bool = Field(default=False, description="The worker is stopping (SIGTERM): place nothing more on it")


class HeartbeatReply(BaseModel):
    state: str
    cancel: list[str]
    abandon: list[str] = Field(default=[], description="Executions it reports running that are no longer its own: kill them")


class ClaimRequest(Strict):
    wait: float = Field(default=20.0, ge=0, le=60)


class ClaimedExecution(BaseModel):
    id: str
    workflow_name: str
    workflow_version: int
    source: str
    filename: str
    bundle: str | None = Field(default=None, description="The sha256 of the bundle to fetch (GET /bundles/SHA256) and import")
    module: str | None = Field(default=None, description="The bundle's module that defines the workflow")
    input: Any
    attempt: int
    completed_tasks: dict[str, Any]
    requests: RequestsJSON | None = None
    gpus: list[int] | None = Field(default=None, description="GPU indexes allotted to this execution")
    traceparent: str | None = Field(default=None, description="W3C trace context of this attempt's spans (tracing on)")
    max_payload_size: int | None = Field(default=None, description="A task result or the output larger than this (JSON bytes) fails")
    max_json_depth: int | None = Field(default=None, description="The server's nesting limit: a task result or the output nested past it in a checkpoint fails")
    recorded: dict[str, Any] = Field(default_factory=dict, description="Values of deterministic builtins (now, uuid4, ...) by call id, for a replay")
    rolled_back: list[str] = Field(default_factory=list, description="Task ids whose rollback ended in an earlier attempt (not run again)")


class ClaimReply(BaseModel):
    executions: list[ClaimedExecution]
    cancel: list[str]


class WorkerResourcesInfo(BaseModel):
    """A worker's last stored sample, as ``GET /workers`` shows it."""

    cpu_total: Number
    cpu_available: Number
    cpu_percent: Number
    memory_total: int
    memory_available: int
    disk_total: int
    disk_free: int
    capacity: dict[str, Number] = Field(default={}, description="Probed dimensions beyond cpu, memory and disk: name -> total")
    available: dict[str, Number] = Field(default={}, description="The same dimensions: name -> available at the last sample")
    metrics: dict[str, Number]
    sampled_at: float | None
    gpus: list[GPUInfo]


class ChosenWorker(BaseModel):
    """Why a dispatched execution went where it did (its latest WORKFLOW_CLAIMED event)."""

    model_config = ConfigDict(extra="allow")
    worker: str
    attempt: int
    reason: str
    allotment: dict[str, Any] | None = Field(description="What was set aside: cpu, memory, disk, gpus (indexes), resources")


class WorkerInfo(BaseModel):
    name: str
    state: str
    labels: dict[str, str]
    max_concurrent_executions: int
    allocation: str
    custom_resources: dict[str, float]
    running: int
    registered_at: float
    last_heartbeat_at: float
    runtime: RuntimeInfo | None
    resources: WorkerResourcesInfo | None
    packages: list[PackageInfo] | None = None


class WorkerPlacement(BaseModel):
    name: str
    state: str
    available: bool
    reason: str


class AttemptInfo(BaseModel):
    attempt: int
    worker: str | None
    started_at: float
    ended_at: float | None = None
    end: str | None = Field(default=None, description="finished, child_died, memory_limit, worker_lost, drained, handed_back; null while it runs")
    cause: str | None = None
    counted: bool = Field(default=False, description="Whether it used up one of max_attempts (a crash)")


class PlacementInfo(BaseModel):
    """``flux execution explain``: why an execution waits, or why its worker won, and its attempts."""

    execution_id: str
    state: str
    summary: str
    unschedulable: str | None
    workers: list[WorkerPlacement]
    chosen: ChosenWorker | None = Field(description="For a dispatched execution: worker, reason, allotment")
    attempt: int = 0
    max_attempts: int = 3
    crashes: int = 0
    attempts: list[AttemptInfo] = []


# --- execution state changes (GET /watch/executions, docs/console.md) -------------------


class ExecutionChange(BaseModel):
    """An execution as it is after a change: the list's columns, without input and output."""

    id: str
    workflow_name: str
    workflow_version: int
    state: str
    worker_name: str | None
    attempt: int
    max_attempts: int
    error: str | None
    scheduled_at: float
    claimed_at: float | None
    started_at: float | None
    finished_at: float | None


class ExecutionChanges(BaseModel):
    """``GET /watch/executions`` as JSON: what changed after ``after``, and the cursor to pass next."""

    changes: list[ExecutionChange]
    cursor: int = Field(description="Pass as 'after' (or follow from it): the newest event id looked at")


# --- task cache and secrets (docs/tasks.md) ---------------------------------------------


class CacheLookup(Strict):
    key: str = Field(pattern=r"^[0-9a-f]{64}$", description="The cache key the child computed (sha256, hex)")


class CacheLookupReply(BaseModel):
    hit: bool
    value: Any = Field(default=None, description="The cached result (when hit)")


class CacheClearReply(BaseModel):
    deleted: int = Field(description="Cache entries deleted")


class SecretValue(Strict):
    value: str = Field(max_length=MAX_SECRET_LENGTH, description="Stored encrypted; never returned")


class SecretInfo(BaseModel):
    name: str
    created_at: float
    updated_at: float


class SecretRequest(Strict):
    attempt: int = Field(ge=1, le=2**31 - 1)
    names: list[str] = Field(min_length=1, max_length=100)

    @field_validator("names")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for name in names:
            check_name(name, "secret")
        return names


class SecretValues(BaseModel):
    values: dict[str, str]
