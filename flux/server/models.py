"""SQLAlchemy 2 models: the server's durable state.

Times are Unix epoch seconds (float): portable across SQLite and PostgreSQL, and
precise enough for the latency figures the benchmarks report. Schema changes go
through Alembic (``flux/server/migrations``); ``tests/server/test_migrations.py`` keeps the two
in step.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from flux.domain.namespaces import DEFAULT
from flux.domain.workers import AllocationMode
from flux.server.jsonvalue import JsonValue


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, Any: JSON}


def namespace_column(primary_key: bool = False) -> Mapped[str]:
    """The namespace a row belongs to (docs/namespaces.md); rows from before namespaces,
    and inserts that name none, are ``default``'s."""
    return mapped_column(String(128), primary_key=primary_key, server_default=DEFAULT)


class NamespaceModel(Base):
    """A namespace: workflows, executions, schedules, secrets and cache entries each
    belong to one, and their names are unique within it (docs/namespaces.md)."""

    __tablename__ = "namespaces"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    #: ACTIVE, or TERMINATING while a forced delete waits for its executions to end.
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    #: Its share of a contended fleet against other namespaces (fair share; docs/contention.md).
    weight: Mapped[float] = mapped_column(Float, server_default="1")
    #: The most its executions may hold at once (``flux.domain.quotas.Quota`` JSON); None: no quota.
    quota: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)


class NamespaceUsageModel(Base):
    """A namespace's decayed usage for fair share (``flux.scheduling.usage``): resource-seconds
    by dimension over the fleet's size, as of ``decayed_at``; and the work its preemptions
    lost. The dispatcher of whichever replica places updates it (docs/contention.md)."""

    __tablename__ = "namespace_usage"

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    usage: Mapped[Any] = mapped_column(JSON)
    decayed_at: Mapped[float] = mapped_column(Float)
    lost_seconds: Mapped[float] = mapped_column(Float, server_default="0", default=0.0)


class WorkflowModel(Base):
    __tablename__ = "workflows"
    __table_args__ = (UniqueConstraint("namespace", "name", "version", name="uq_workflow_namespace_name_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace: Mapped[str] = namespace_column()
    name: Mapped[str] = mapped_column(String(128), index=True)
    version: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(Text)
    source_digest: Mapped[str] = mapped_column(String(64))
    filename: Mapped[str] = mapped_column(String(255))
    requests: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    affinity: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    routing: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    pending_timeout: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Attempts an execution may crash in before it fails; None: the server's default.
    max_attempts: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: Seconds from submission before an execution ends TIMED_OUT (docs/waits.md).
    timeout: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    #: The bundle this version runs from (docs/bundles.md); None: ``source`` alone.
    bundle_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: The module of the bundle that defines it (``pkg.flows``), imported on the worker.
    module: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: Its priority, preemptible, concurrency and max_concurrency options, those set (docs/contention.md).
    contention: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    #: Every option of the version as one document (``WorkflowOptions.stored``), read back with
    #: ``WorkflowOptions.from_json``; the columns above repeat those dispatch and submission read.
    options: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)


class BundleModel(Base):
    """A bundle's bytes, stored once per sha256: in the row when small, else in the
    server's blob directory (``data`` None), see ``flux.server.bundles``."""

    __tablename__ = "bundles"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)


class ExecutionModel(Base):
    __tablename__ = "executions"
    #: One index for each order and filter a list serves (newest first, ties by id:
    #: the keyset ``flux.server.executions.history`` pages on), checked with EXPLAIN
    #: in tests/server/test_history.py on both databases. ``state`` serves dispatch's queue too.
    #: Lists are of one namespace: their indexes lead with it. ``state`` alone (no
    #: namespace) serves dispatch's queue and the metrics.
    __table_args__ = (
        Index("ix_executions_order", "namespace", "scheduled_at", "id"),
        Index("ix_executions_state_order", "state", "scheduled_at", "id"),
        # each (priority, namespace) group's oldest (flux.server.queue); the queue in
        # priority order is ix_executions_queue, below the class (it sorts priority DESC)
        Index("ix_executions_queue_groups", "state", "priority", "namespace", "scheduled_at", "id"),
        Index("ix_executions_namespace_state_order", "namespace", "state", "scheduled_at", "id"),
        Index("ix_executions_workflow_order", "namespace", "workflow_name", "scheduled_at", "id"),
        Index("ix_executions_worker_order", "namespace", "worker_name", "scheduled_at", "id"),
        Index("ix_executions_worker_state", "worker_name", "state"),
        Index("ix_executions_finished", "finished_at"),
        Index("ix_executions_schedule_order", "namespace", "schedule", "scheduled_at", "id"),
        #: The idempotency key of a schedule's fire: one execution per due time, across
        #: replicas and crashes (docs/schedules.md). NULLs (runs started by hand) never clash.
        #: A unique index, not a constraint: SQLite would rebuild the table (and drop the
        #: triggers of migration 0009) to add a constraint.
        Index("uq_execution_schedule_due", "namespace", "schedule", "scheduled_for", unique=True),
        # durable waits and timeouts (docs/waits.md): a parent's children, the sleepers
        # due now, and the deadlines of what has not finished
        Index("ix_executions_parent", "parent_id"),
        # a gang's members by rank (docs/gangs.md)
        Index("ix_executions_gang", "gang_id", "rank"),
        Index("ix_executions_state_ready", "state", "ready_at"),
        Index(
            "ix_executions_deadline",
            "deadline",
            sqlite_where=text("finished_at IS NULL"),
            postgresql_where=text("finished_at IS NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: Its workflow's; a call()'s child lives in its parent's.
    namespace: Mapped[str] = namespace_column()
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id"))
    workflow_name: Mapped[str] = mapped_column(String(128))
    workflow_version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    input: Mapped[Any | None] = mapped_column(JsonValue(none_as_null=True), nullable=True)
    output: Mapped[Any | None] = mapped_column(JsonValue(none_as_null=True), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: A FAILED one's ``Failure`` (type, message, traceback), when user code raised it.
    failure: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    #: Placement constraints copied from the workflow at submission (dispatch reads only this row).
    requests: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    affinity: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    routing: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    #: Seconds it may wait in SCHEDULED (since ``pending_since``) before it fails.
    pending_timeout: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: When it last entered SCHEDULED (submission or reschedule).
    pending_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The last placement summary recorded for it ("0/3 workers are available: ...").
    placement_note: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: Set while no registered worker could ever satisfy it.
    unschedulable: Mapped[str | None] = mapped_column(Text, nullable=True)
    worker_name: Mapped[str | None] = mapped_column(String(128), nullable=True)
    #: Fencing token: bumped on every claim; checkpoints from an older attempt are refused.
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    #: Attempts that ended in a crash (``AttemptEnd.counts``); at ``max_attempts`` it fails.
    crashes: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    #: Not placed before this time: the backoff after a crashed attempt; while SLEEPING,
    #: when the sleep is due.
    ready_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Submitted for an explicit version; else a new version registered before its first
    #: attempt replaces the one it was queued with (a relaxed request rescues it).
    version_pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    delivered: Mapped[bool] = mapped_column(Boolean, default=False)
    #: What dispatch set aside on the worker for this attempt: {"gpus": [...], "cpu": ..., ...}.
    allotment: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    #: Sequence number of the newest event in this execution's log.
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    #: The number of the last checkpoint batch accepted from the current attempt: a
    #: batch re-sent after its response was lost is acknowledged, not appended twice.
    checkpoint_batch: Mapped[int] = mapped_column(Integer, default=0)
    #: Sequence number of the newest line in this execution's output log (across attempts).
    last_log_seq: Mapped[int] = mapped_column(Integer, default=0)
    #: The last log batch accepted from the current attempt (reset by every claim), the
    #: log's counterpart of ``checkpoint_batch``.
    log_batch: Mapped[int] = mapped_column(Integer, default=0)
    #: Some attempt's worker dropped lines past its ``--max-log-bytes``.
    log_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    #: The execution whose ``call`` started this one (docs/waits.md).
    parent_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: A gang's own row: its ``Gang`` JSON form (docs/gangs.md); members run, it holds no worker.
    gang: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    #: A member's row: its gang's execution and its rank (0 .. size-1); out of the queue.
    gang_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    rank: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: ``host:port`` its worker gave at the rendezvous of the current attempt (None before).
    gang_address: Mapped[str | None] = mapped_column(String(300), nullable=True)
    #: What it waits for while SLEEPING, PAUSED or AWAITING_CHILD (``flux.domain.waits``).
    wait: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    #: When it ends TIMED_OUT: submission + its workflow's ``timeout``.
    deadline: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: W3C ``traceparent`` of the span its next step hangs under (the submission, then
    #: the latest dispatch); None while tracing is off (docs/tracing.md).
    traceparent: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: The schedule that started it, and the due time it was started for (docs/schedules.md).
    schedule: Mapped[str | None] = mapped_column(String(128), nullable=True)
    scheduled_for: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Optimistic-concurrency counter: every UPDATE is conditional on it, so two server
    #: replicas racing on one execution cannot both win (the loser retries).
    row_version: Mapped[int] = mapped_column(Integer)
    #: Dispatch is FIFO on this within a priority and namespace (ties broken by id).
    scheduled_at: Mapped[float] = mapped_column(Float)
    #: Higher is placed first (``flux.domain.priority``), and its class when it has one.
    priority: Mapped[int] = mapped_column(Integer, server_default="0")
    priority_class: Mapped[str | None] = mapped_column(String(128), nullable=True)
    #: False: never a victim of preemption.
    preemptible: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    #: Its concurrency keys, rendered at submission: ``[{"key", "limit"}]``.
    concurrency: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    #: While its attempt is being preempted: by whom, and when the grace period ends.
    preempted_by: Mapped[str | None] = mapped_column(String(32), nullable=True)
    preempt_deadline: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Seconds of an attempt in which it is a victim only when nothing else makes room.
    min_runtime: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Its last completed task (what a preemption loses is the work since, or since its claim).
    progress_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: When an attempt of it last ended preempted (``--preemption-cooldown``).
    preempted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Seconds of work its preempted attempts threw away (since each one's last checkpoint).
    preemption_lost_seconds: Mapped[float] = mapped_column(Float, server_default="0", default=0.0)
    claimed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    #: Never read through; it tells the unit of work to insert an execution before
    #: the events that reference it (they are added in the same flush).
    events: Mapped[list["ExecutionEventModel"]] = relationship(
        back_populates="execution", order_by="ExecutionEventModel.seq", cascade="all, delete-orphan"
    )

    __mapper_args__ = {"version_id_col": row_version}

    def leave_worker(self) -> None:
        """Its attempt has ended without ending it (a crash, a hand-back, a durable wait):
        no worker holds it, nothing is set aside, the next attempt numbers its batches anew."""
        self.worker_name = None
        self.delivered = False
        self.allotment = None
        self.started_at = None
        self.checkpoint_batch = 0
        self.unschedulable = None
        self.preempted_by = None
        self.preempt_deadline = None
        self.gang_address = None


#: The queue in placement order, highest priority first (``flux.server.queue``): a
#: descending column, so that SQLite reads it without sorting.
Index(
    "ix_executions_queue",
    ExecutionModel.state,
    ExecutionModel.priority.desc(),
    ExecutionModel.scheduled_at,
    ExecutionModel.id,
)


class ExecutionCountModel(Base):
    """Finished executions by terminal state, kept by database triggers (migration
    0009) on every insert, update and delete of ``executions``: ``/metrics`` reads
    these few rows instead of counting the history (active states are counted from
    ``ix_executions_state_order``, a range as small as the queue)."""

    __tablename__ = "execution_counts"

    state: Mapped[str] = mapped_column(String(16), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger, default=0)


class ExecutionEventModel(Base):
    __tablename__ = "execution_events"
    __table_args__ = (UniqueConstraint("execution_id", "seq", name="uq_event_execution_seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[str] = mapped_column(ForeignKey("executions.id"))
    seq: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(32))
    name: Mapped[str | None] = mapped_column(String(128), nullable=True)
    task_id: Mapped[str | None] = mapped_column(String(160), nullable=True)
    value: Mapped[Any | None] = mapped_column(JsonValue(none_as_null=True), nullable=True)
    time: Mapped[float] = mapped_column(Float)
    #: The worker that reported it (None for the server's own events).
    worker_name: Mapped[str | None] = mapped_column(String(128), nullable=True)

    execution: Mapped[ExecutionModel] = relationship(back_populates="events")


class ExecutionLogModel(Base):
    """One line of what an execution printed or logged (docs/logs.md). No ORM
    relationship: the database deletes an execution's lines with it (``ON DELETE
    CASCADE``; SQLite enforces it because every connection turns ``foreign_keys`` on),
    so deleting an execution never loads its output."""

    __tablename__ = "execution_logs"
    __table_args__ = (UniqueConstraint("execution_id", "seq", name="uq_log_execution_seq"),)

    #: 64-bit on PostgreSQL (lines outnumber events by far); SQLite's rowid is already.
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    execution_id: Mapped[str] = mapped_column(ForeignKey("executions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    time: Mapped[float] = mapped_column(Float)
    stream: Mapped[str] = mapped_column(String(8))
    level: Mapped[str | None] = mapped_column(String(16), nullable=True)
    logger: Mapped[str | None] = mapped_column(String(128), nullable=True)
    task_id: Mapped[str | None] = mapped_column(String(160), nullable=True)
    message: Mapped[str] = mapped_column(Text)


class ScheduleModel(Base):
    """A workflow run on cron, on an interval or once (docs/schedules.md). The firing
    loop (``flux.server.schedules.firing``) polls ``next_fire_at`` and advances
    ``next_due`` in the transaction that creates the execution."""

    __tablename__ = "schedules"
    __table_args__ = (
        Index("ix_schedules_paused_next_fire", "paused", "next_fire_at"),
        UniqueConstraint("namespace", "name", name="uq_schedule_namespace_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: Where it fires its executions.
    namespace: Mapped[str] = namespace_column()
    name: Mapped[str] = mapped_column(String(128))
    workflow_name: Mapped[str] = mapped_column(String(128))
    #: None: the newest version at each fire.
    workflow_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cron: Mapped[str | None] = mapped_column(String(255), nullable=True)
    every: Mapped[float | None] = mapped_column(Float, nullable=True)
    at: Mapped[float | None] = mapped_column(Float, nullable=True)
    anchor: Mapped[float] = mapped_column(Float, default=0.0)
    timezone: Mapped[str] = mapped_column(String(64))
    input: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    overlap: Mapped[str] = mapped_column(String(16))
    catch_up: Mapped[str] = mapped_column(String(16))
    catch_up_limit: Mapped[int] = mapped_column(Integer)
    jitter: Mapped[float] = mapped_column(Float, default=0.0)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    #: Why the server paused it (its timing lies outside what the API accepts); None: by hand, or not paused.
    paused_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: The next due time not yet fired (None: a one-off that has fired).
    next_due: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: ``next_due`` plus its jitter: when the loop fires it.
    next_fire_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: overlap=queue_one: the due time held back until the active run ends.
    queued_due: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The priority its runs get (a class name or an int, as text); None: the workflow's.
    priority: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class WorkerModel(Base):
    __tablename__ = "workers"

    #: Registration order; also the stable tie-break between equally loaded workers.
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    state: Mapped[str] = mapped_column(String(16))
    session_token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    #: The token before the last registration: a worker killed after the server issued
    #: a new token but before it saved it restarts with this one, and is still itself.
    previous_token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    labels: Mapped[Any] = mapped_column(JSON, default=dict)
    max_concurrent_executions: Mapped[int] = mapped_column(Integer, default=1)
    #: "sample" (the spec's threshold on sampled availability) or "reserve".
    allocation: Mapped[str] = mapped_column(String(16), default=AllocationMode.SAMPLE.value)
    #: Countable custom resources it advertises ({"fpga": 2}).
    custom_resources: Mapped[Any] = mapped_column(JSON, default=dict)
    heartbeat_interval: Mapped[float] = mapped_column(Float)
    registered_at: Mapped[float] = mapped_column(Float)
    #: The liveness lease: flushed from server memory now and then, not on every beat
    #: (``flux.server.liveness``); a restarted server grants a fresh grace period.
    last_heartbeat_at: Mapped[float] = mapped_column(Float)
    #: Bumped whenever the stored resources sample changes (only when it moved
    #: materially, see ``flux.domain.samples``), so dispatch can cache each worker's view
    #: and reload only what moved; labels, slots and packages change only when
    #: ``registered_at`` does.
    resources_version: Mapped[int] = mapped_column(Integer, default=0)
    #: SHA-256 of the installed packages: a re-registration rewrites them only when it differs.
    packages_digest: Mapped[str] = mapped_column(String(64), default="")
    #: Set by ``flux worker drain``: no new work; survives server restarts.
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    #: The only namespaces whose executions it takes (``--namespace``); None: every one.
    #: Workers stay fleet-wide: the names need not exist.
    namespaces: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)

    runtime: Mapped["WorkerRuntimeModel"] = relationship(cascade="all, delete-orphan", uselist=False)
    resources: Mapped["WorkerResourcesModel"] = relationship(cascade="all, delete-orphan", uselist=False)
    gpus: Mapped[list["WorkerResourcesGPUModel"]] = relationship(
        cascade="all, delete-orphan", order_by="WorkerResourcesGPUModel.index"
    )
    #: The package set it reported, shared with every worker that reported the same one.
    packages: Mapped[list["PackageModel"]] = relationship(
        primaryjoin="foreign(PackageModel.digest) == WorkerModel.packages_digest",
        viewonly=True,
        order_by="PackageModel.name",
    )


class WorkerRuntimeModel(Base):
    __tablename__ = "worker_runtimes"

    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"), primary_key=True)
    python_version: Mapped[str] = mapped_column(String(32))
    os_name: Mapped[str] = mapped_column(String(64))
    os_version: Mapped[str] = mapped_column(String(128))
    hostname: Mapped[str] = mapped_column(String(255))
    cpu_arch: Mapped[str] = mapped_column(String(32))


class WorkerResourcesModel(Base):
    __tablename__ = "worker_resources"

    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"), primary_key=True)
    #: The probed quantities by dimension ({"cpu": 8.0, "memory": ..., "disk": ...}, and any
    #: other the probe samples): what the worker has (``flux.server.resources``)...
    capacity: Mapped[Any] = mapped_column(JSON, default=dict)
    #: ...and what of it was available at the last material sample.
    available: Mapped[Any] = mapped_column(JSON, default=dict)
    cpu_percent: Mapped[float] = mapped_column(Float, default=0.0)
    #: Live metrics the worker publishes with each heartbeat (for routing policies).
    metrics: Mapped[Any] = mapped_column(JSON, default=dict)
    sampled_at: Mapped[float] = mapped_column(Float)


class WorkerResourcesGPUModel(Base):
    __tablename__ = "worker_resources_gpus"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    uuid: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(255))
    memory_total: Mapped[int] = mapped_column(BigInteger)
    memory_available: Mapped[int] = mapped_column(BigInteger)
    utilization: Mapped[float] = mapped_column(Float, default=0.0)
    compute_capability: Mapped[str | None] = mapped_column(String(16))
    mig: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    mig_profile: Mapped[str | None] = mapped_column(String(64))
    parent: Mapped[str | None] = mapped_column(String(128))
    unhealthy: Mapped[str | None] = mapped_column(String(255))


class PackageSetModel(Base):
    """A set of installed packages by its digest (``workers.packages_digest``). Stored
    once however many workers report it (a fleet is mostly one image), never changed:
    a worker whose packages change reports another set."""

    __tablename__ = "package_sets"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)


class PackageModel(Base):
    __tablename__ = "package_set_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(ForeignKey("package_sets.digest"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    version: Mapped[str] = mapped_column(String(128))
