"""Pydantic models of the HTTP API: what FastAPI validates and what /docs shows.

The worker protocol's messages live in ``flux.protocol`` (one definition for the server
and its workers); they are re-exported here with the client-facing models, so every
route takes its bodies from this one module."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_serializer

from flux.domain.concurrency import check_concurrency
from flux.domain.durations import parse_duration
from flux.domain.events import EventType, ExecutionState
from flux.domain.names import NAME_PATTERN, check_name
from flux.domain.priority import check_priority
from flux.domain.quotas import whole
from flux.domain.secrets import MAX_SECRET_LENGTH

# The worker protocol's messages, re-exported for the routes (and whoever imported them from here).
from flux.protocol.base import Number, Strict
from flux.protocol.checkpoints import Checkpoint, CheckpointReply, EventIn  # noqa: F401
from flux.protocol.claims import AllotmentJSON, ClaimedExecution, ClaimReply, ClaimRequest, RequestsJSON  # noqa: F401
from flux.protocol.failures import Failure  # noqa: F401
from flux.protocol.heartbeat import Heartbeat, HeartbeatReply  # noqa: F401
from flux.protocol.logs import MAX_LOG_LINES, LogBatch, LogBatchReply, LogLineIn, LogStream  # noqa: F401
from flux.protocol.registration import (  # noqa: F401
    GPUInfo,
    PackageInfo,
    RegistrationReply,
    ResourcesInfo,
    RuntimeInfo,
    WorkerRegistration,
)
from flux.protocol.services import CacheLookup, CacheLookupReply, SecretRequest, SecretValues  # noqa: F401
from flux.scheduling.binding import Binding

# --- errors ----------------------------------------------------------------------------


class ErrorItem(BaseModel):
    loc: list[str | int] = Field(description="Where: 'body', 'query' or 'path', then the field path")
    msg: str


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer (see docs/security.md)."""

    detail: str = Field(description="Human-readable reason")
    code: str = Field(
        description="not_found, unauthorized, forbidden, conflict, invalid, payload_too_large, validation_error, ..."
    )
    errors: list[ErrorItem] | None = Field(default=None, description="Field errors; only for validation_error")


# --- workflows -------------------------------------------------------------------------


#: A label value (equality) or an operator such as {"op": "In", "values": [...]}.
AffinityJSON = dict[str, str | dict[str, Any]]


class RoutingJSON(BaseModel):
    """A routing policy (``flux.domain.routing.RoutingPolicy.to_dict``): weighted terms."""

    model_config = ConfigDict(extra="allow")
    terms: list[dict[str, Any]] = Field(description="Each {'kind': 'label'|'metric'|'load', 'weight': ..., ...}")


class ConcurrencyJSON(BaseModel):
    """``Concurrency(key=..., limit=...)``: ``key`` a template over the input (docs/contention.md)."""

    key: str = Field(description="E.g. 'customer:{input.customer_id}'; rendered at submission")
    limit: int = Field(ge=1, le=1_000_000)


GANG = (
    "Run as a gang (docs/gangs.md): {'size': 4, 'topology': 'rack', 'prefer': 'zone', 'per_worker': 1, "
    "'start_timeout': 300}; the request is per member"
)

#: A quota's or a holding's amount as given: 8 stays 8 (not 8.0), 1.5 stays 1.5.
Amount = Annotated[Number, AfterValidator(whole)]

#: A priority class's name (``high``) or an int; validated by ``flux.domain.priority.check_priority``.
Priority = int | str


def _priority(value: object) -> int | str | None:
    try:
        return check_priority(value, "priority")
    except ValueError as exc:
        raise ValueError(str(exc)) from None


class Contention(Strict):
    """A workflow's options that decide who gets a contended fleet (docs/contention.md)."""

    priority: Priority | None = Field(
        default=None, description="A priority class's name or an int; null: the server's default class"
    )
    preemptible: bool = Field(default=True, description="False: never preempted for higher-priority work")
    concurrency: ConcurrencyJSON | None = None
    max_concurrency: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Executions of it holding a worker at once"
    )
    min_runtime: float | None = Field(
        default=None,
        gt=0,
        le=1e10,
        description="Seconds (or '10m') of an attempt in which it is preempted only when nothing else makes room",
    )

    @field_validator("priority")
    @classmethod
    def _valid_priority(cls, value: object) -> object:
        return _priority(value)

    @field_validator("min_runtime", mode="before")
    @classmethod
    def _valid_min_runtime(cls, value: object) -> object:
        return value if value is None else parse_duration(value, "min_runtime")  # type: ignore[arg-type]

    @field_validator("concurrency")
    @classmethod
    def _valid_concurrency(cls, value: ConcurrencyJSON | None) -> ConcurrencyJSON | None:
        if value is not None:
            check_concurrency(value.model_dump(), "concurrency")
        return value


class WorkflowSpec(Contention):
    name: str = Field(
        json_schema_extra={"pattern": NAME_PATTERN}, description="1-128 of A-Z a-z 0-9 _ - . ; not starting with ."
    )
    requests: dict[str, Any] | None = None
    affinity: AffinityJSON | None = None
    routing: dict[str, Any] | None = None
    pending_timeout: float | None = Field(default=None, gt=0)
    max_attempts: int | None = Field(
        default=None, ge=1, le=1000, description="Attempts that may crash before it fails; null: the server's default"
    )
    timeout: float | None = Field(
        default=None, gt=0, le=1e10, description="Seconds from submission before it ends TIMED_OUT"
    )
    gang: dict[str, Any] | None = Field(default=None, description=GANG)

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
        default=True,
        description="Turn the bundle's requirements (requirements.txt, pyproject.toml) into package constraints",
    )


class BundleInfo(BaseModel):
    sha256: str
    size: int = Field(description="Bytes, zipped")
    files: int


class WorkflowInfo(BaseModel):
    name: str
    contention: dict[str, Any] | None = Field(
        default=None, description="Its priority, preemptible, min_runtime, concurrency and max_concurrency, those set"
    )
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
    gang: dict[str, Any] | None = Field(default=None, description=GANG)
    warnings: list[str] = Field(default=[], description="E.g. no registered worker could ever satisfy its request")


class RunRequest(Strict):
    input: Any = None
    version: int | None = Field(default=None, ge=1)
    priority: Priority | None = Field(
        default=None, description="This run's priority (a class name or an int); null: the workflow's"
    )
    gang: dict[str, Any] | None = Field(
        default=None,
        description="This run's gang: a whole one, or fields changing the workflow's ({'size': 8} resizes it); "
        "null: the workflow's (docs/gangs.md)",
    )

    @field_validator("priority")
    @classmethod
    def _valid_priority(cls, value: object) -> object:
        return _priority(value)


class ResumeRequest(Strict):
    input: Any = Field(default=None, description="What the paused workflow's pause() returns")


class PruneRequest(Strict):
    older_than: float = Field(
        gt=0, le=1e12, description="Seconds: executions that finished longer ago than this are deleted"
    )


class PruneReply(BaseModel):
    deleted: int = Field(description="Executions deleted, with their events and log lines")


# --- executions ------------------------------------------------------------------------


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


class GangInfo(BaseModel):
    """A gang's shape as its execution carries it (``Gang.to_dict()``; docs/gangs.md)."""

    size: int = Field(description="How many members")
    topology: str = Field(description="The worker label every member's worker shares one value of")
    prefer: str | None = Field(
        default=None, description="A label to pack the members into as few values of as possible"
    )
    per_worker: int = Field(default=1, description="How many members one worker may hold")
    start_timeout: float = Field(description="Seconds the placed members have to all start")

    @model_serializer(mode="wrap")
    def _prefer_only_when_set(self, handler):  # noqa: ANN001, ANN202 - as Gang.to_dict writes it
        fields = handler(self)
        if fields.get("prefer") is None:
            fields.pop("prefer", None)
        return fields


class GangMemberInfo(BaseModel):
    """One member of a gang, as its gang's ``GET /executions/ID`` lists it (docs/gangs.md)."""

    rank: int
    id: str = Field(description="The member's own execution: its events, logs and attempts")
    worker_name: str | None = Field(description="The worker it holds now (null between the gang's attempts)")
    attempt: int
    state: ExecutionState
    started_at: float | None = None
    finished_at: float | None = None


class ExecutionInfo(BaseModel):
    id: str
    namespace: str = Field(default="default", description="The namespace it belongs to (docs/namespaces.md)")
    workflow_name: str
    workflow_version: int
    state: ExecutionState
    input: Any = Field(default=None, description="Absent from list items unless asked for (?include=input)")
    output: Any = Field(default=None, description="Absent from list items unless asked for (?include=output)")
    error: str | None
    failure: Failure | None = Field(
        default=None,
        description="A FAILED one's type, message and traceback, when its code raised (GET /executions/ID only)",
    )
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
    scheduled_for: float | None = Field(
        default=None, description="The due time (epoch seconds) its schedule started it for"
    )
    wait: WaitInfo | None = Field(
        default=None, description="What it waits for while SLEEPING, PAUSED or AWAITING_CHILD"
    )
    parent: str | None = Field(default=None, description="The execution whose call() started it")
    children: list[str] | None = Field(
        default=None, description="The executions its call()s started (GET /executions/ID only)"
    )
    deadline: float | None = Field(default=None, description="When it ends TIMED_OUT (its workflow's timeout)")
    priority: int = Field(default=0, description="Higher is placed first (docs/contention.md)")
    priority_class: str | None = Field(default=None, description="The priority class it was given by, if any")
    preemptible: bool = True
    concurrency: list[ConcurrencyJSON] | None = Field(
        default=None, description="Its concurrency keys, rendered at submission"
    )
    preempted_by: str | None = Field(
        default=None, description="While its attempt is being preempted: for which execution"
    )
    preempt_deadline: float | None = Field(default=None, description="When the preemption's grace period ends")
    min_runtime: float | None = Field(
        default=None, description="Seconds of an attempt in which it is preempted only when nothing else makes room"
    )
    preemption_lost_seconds: float = Field(
        default=0.0, description="Seconds of work its preempted attempts threw away (since each one's last checkpoint)"
    )
    gang: GangInfo | None = Field(default=None, description="A gang's own execution: the gang it runs as")
    gang_id: str | None = Field(default=None, description="A gang member's: the gang's execution")
    rank: int | None = Field(default=None, description="A gang member's rank, 0 .. size-1")
    members: list[GangMemberInfo] | None = Field(
        default=None, description="A gang's members by rank (GET /executions/ID of a gang only)"
    )


# --- execution logs (docs/logs.md) ------------------------------------------------------

#: The ``level`` filter: a minimum, over the standard ``logging`` level names.
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


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
    next_after: int = Field(
        description="Pass as 'after' for the next page; when the page is not full, the execution's newest seq"
    )
    truncated: bool = Field(description="Some attempt's worker dropped lines past its --max-log-bytes")


# --- workers ---------------------------------------------------------------------------


class GPUDevice(GPUInfo):
    """A device as ``GET /workers`` shows it: what is at its default (a healthy card's
    ``unhealthy``, a card's ``mig_profile``) is absent, as a plain card showed before devices."""

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler):  # noqa: ANN001, ANN202
        return {name: value for name, value in handler(self).items() if value is not None and value is not False}


class WorkerResourcesInfo(BaseModel):
    """A worker's last stored sample, as ``GET /workers`` shows it."""

    cpu_total: Number
    cpu_available: Number
    cpu_percent: Number
    memory_total: int
    memory_available: int
    disk_total: int
    disk_free: int
    capacity: dict[str, Number] = Field(
        default={}, description="Probed dimensions beyond cpu, memory and disk: name -> total"
    )
    available: dict[str, Number] = Field(
        default={}, description="The same dimensions: name -> available at the last sample"
    )
    metrics: dict[str, Number]
    sampled_at: float | None
    gpus: list[GPUDevice]


class ChosenWorker(BaseModel):
    """Why a dispatched execution went where it did (its latest WORKFLOW_CLAIMED event)."""

    model_config = ConfigDict(extra="allow")
    worker: str
    attempt: int
    reason: str
    allotment: dict[str, Any] | None = Field(
        description="What was set aside: cpu, memory, disk, gpus (indexes), resources"
    )


class GPUAllotment(BaseModel):
    """One execution's share of one of a worker's GPUs (``flux worker show``)."""

    index: int
    uuid: str | None = Field(default=None, description="Absent in allotments written before devices")
    execution_id: str
    fraction: float = Field(description="1.0: the whole device")
    memory: int | None = Field(default=None, description="Bytes of device memory set aside")


class WorkerInfo(BaseModel):
    name: str
    state: str
    labels: dict[str, str]
    max_concurrent_executions: int
    allocation: str
    custom_resources: dict[str, float]
    namespaces: list[str] | None = Field(
        default=None, description="The only namespaces it takes work of; null: every one"
    )
    running: int
    registered_at: float
    last_heartbeat_at: float
    runtime: RuntimeInfo | None
    resources: WorkerResourcesInfo | None
    packages: list[PackageInfo] | None = None
    gpu_allotments: list[GPUAllotment] | None = Field(
        default=None, description="One worker shown: which executions hold its GPUs, and how much of each"
    )


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
    end: str | None = Field(
        default=None,
        description=(
            "finished, child_died, memory_limit, worker_lost, drained, handed_back, suspended, device_failure;"
            " null while it runs"
        ),
    )
    cause: str | None = None
    counted: bool = Field(default=False, description="Whether it used up one of max_attempts (a crash)")


class QueueInfo(BaseModel):
    """Where an execution stands in a contended fleet (docs/contention.md)."""

    priority: int
    priority_class: str | None = None
    position: int | None = Field(
        default=None, description="While SCHEDULED: its place in its namespace's queue (1: next)"
    )
    higher_waiting: int = Field(default=0, description="Executions of higher priority waiting, in every namespace")
    quota: dict[str, Amount] | None = Field(default=None, description="Its namespace's quota")
    held: dict[str, Amount] = Field(default={}, description="What its namespace's executions hold now")
    note: str | None = Field(
        default=None,
        description=(
            "What the last round said of it: a quota, a concurrency key, a higher priority's room, its own preemption"
        ),
    )
    preempted_by: str | None = None
    preempt_deadline: float | None = None
    preempting: dict[str, float] = Field(
        default={}, description="The executions being preempted for it, and when each one's attempt ends"
    )


class GangExplanation(BaseModel):
    """``flux execution explain`` of a gang (docs/gangs.md): why it waits, domain by domain,
    or where its members were placed."""

    size: int
    topology: str
    shortfall: str | None = Field(
        default=None,
        description="While it waits and fits nowhere now: what each topology domain holds of it and what it lacks",
    )
    domains: list[str] = Field(default=[], description="One line per domain: its workers, what they hold, why not more")
    domain: str | None = Field(default=None, description="Where its current attempt was placed (its topology value)")
    members: list[GangMemberInfo] = []


class PlacementInfo(BaseModel):
    """``flux execution explain``: why an execution waits, or why its worker won, and its attempts."""

    execution_id: str
    state: str
    summary: str
    binding: Binding | None = Field(
        default=None, description="While SCHEDULED: what blocks it first (its kind; the line the summary leads with)"
    )
    unschedulable: str | None
    workers: list[WorkerPlacement]
    chosen: ChosenWorker | None = Field(description="For a dispatched execution: worker, reason, allotment")
    attempt: int = 0
    max_attempts: int = 3
    crashes: int = 0
    attempts: list[AttemptInfo] = []
    queue: QueueInfo | None = None
    gang: GangExplanation | None = Field(default=None, description="A gang's own execution (docs/gangs.md)")


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
    gang_id: str | None = Field(
        default=None, description="A gang member's gang: lists show it under its gang (docs/gangs.md)"
    )


class ExecutionChanges(BaseModel):
    """``GET /watch/executions`` as JSON: what changed after ``after``, and the cursor to pass next."""

    changes: list[ExecutionChange]
    cursor: int = Field(description="Pass as 'after' (or follow from it): the newest event id looked at")


# --- task cache and secrets (docs/tasks.md) ---------------------------------------------


class CacheClearReply(BaseModel):
    deleted: int = Field(description="Cache entries deleted")


class SecretValue(Strict):
    value: str = Field(max_length=MAX_SECRET_LENGTH, description="Stored encrypted; never returned")


class SecretInfo(BaseModel):
    name: str
    created_at: float
    updated_at: float
