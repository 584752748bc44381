"""Workers: registration, authentication, heartbeats, liveness and eviction.

A worker is ONLINE while it heartbeats, STALE once it has missed a few (dispatch
skips it), and OFFLINE once it is evicted after ``eviction_grace_period``: its
session token is revoked and everything it held goes back to SCHEDULED, to resume
elsewhere from the event log. An evicted worker that comes back must register again.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from flux.domain.events import HOLDING_STATES
from flux.models import (
    ExecutionModel,
    WorkerModel,
    WorkerPackageModel,
    WorkerResourcesGPUModel,
    WorkerResourcesModel,
    WorkerRuntimeModel,
)
from flux.server import executions
from flux.server.errors import Forbidden, NotFound, Unauthorized
from flux.server.schemas import Heartbeat, PackageInfo, ResourcesInfo, WorkerInfo, WorkerRegistration

ONLINE, STALE, OFFLINE = "ONLINE", "STALE", "OFFLINE"
DRAINING, DRAINED = "DRAINING", "DRAINED"
#: Heartbeats a worker may miss before dispatch stops choosing it.
STALE_AFTER_MISSED = 3
#: A delivered execution the worker has not reported for this many heartbeats (plus
#: slack for a slow claim response) is taken as lost in transit.
LOST_AFTER_HEARTBEATS, LOST_SLACK = 3, 2.0

RESOURCE_FIELDS = ("cpu_total", "cpu_available", "cpu_percent", "memory_total", "memory_available", "disk_total", "disk_free")
GPU_FIELDS = ("index", "uuid", "name", "memory_total", "memory_available", "utilization")
RUNTIME_FIELDS = ("python_version", "os_name", "os_version", "hostname", "cpu_arch")


def _fields(row: object, names: tuple[str, ...]) -> dict:
    return {name: getattr(row, name) for name in names}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def authenticate(session: Session, token: str | None, name: str | None = None) -> WorkerModel:
    """The worker that owns this session token; ``name`` must be that worker when given."""
    if not token:
        raise Unauthorized("missing worker session token (Authorization: Bearer ...)")
    worker = session.scalars(select(WorkerModel).where(WorkerModel.session_token_hash == hash_token(token))).first()
    if worker is None or worker.state == OFFLINE:
        raise Unauthorized("invalid or revoked worker session token; register again")
    if name is not None and worker.name != name:
        raise Forbidden(f"this session belongs to worker {worker.name!r}, not {name!r}")
    return worker


def _sampled_at(resources: ResourcesInfo) -> float:
    if resources.sampled_at:
        try:
            return datetime.fromisoformat(resources.sampled_at).timestamp()
        except ValueError:
            pass
    return time.time()


def _store_resources(worker: WorkerModel, resources: ResourcesInfo, metrics: dict[str, float]) -> None:
    values = {**_fields(resources, RESOURCE_FIELDS), "metrics": metrics, "sampled_at": _sampled_at(resources)}
    if worker.resources is None:
        worker.resources = WorkerResourcesModel(**values)
    else:
        for key, value in values.items():
            setattr(worker.resources, key, value)
    worker.gpus = [WorkerResourcesGPUModel(**gpu.model_dump()) for gpu in resources.gpus]
    worker.resources_version = (worker.resources_version or 0) + 1


def register(session: Session, body: WorkerRegistration) -> tuple[str, list[str]]:
    """Create or refresh a worker; returns its new session token and executions to abandon.

    Re-registering under a known name is a restart: what the old incarnation held and
    the new one does not report as running goes back to the queue at once, instead of
    waiting for eviction.
    """
    now = time.time()
    token = secrets.token_urlsafe(32)
    worker = session.scalars(select(WorkerModel).where(WorkerModel.name == body.name)).first()
    if worker is None:
        worker = WorkerModel(name=body.name, resources_version=0)
        session.add(worker)
    worker.state = ONLINE
    worker.session_token_hash = hash_token(token)
    worker.labels = body.labels
    worker.max_concurrent_executions = body.max_concurrent_executions
    worker.allocation = body.allocation
    worker.custom_resources = body.custom_resources
    worker.heartbeat_interval = body.heartbeat_interval
    worker.registered_at = now
    worker.last_heartbeat_at = now
    worker.runtime = WorkerRuntimeModel(**body.runtime.model_dump())
    worker.packages = [WorkerPackageModel(name=p.name, version=p.version) for p in body.packages]
    _store_resources(worker, body.resources, body.metrics)
    still_running = set(body.running)
    for execution in executions.held_by(session, body.name):
        if execution.id not in still_running or not execution.delivered:
            executions.reschedule(session, execution, f"worker {body.name} restarted without it")
    session.flush()
    held = {e.id for e in executions.held_by(session, body.name)}
    return token, sorted(still_running - held)


def heartbeat(session: Session, worker: WorkerModel, body: Heartbeat) -> tuple[str, list[str], bool]:
    """Record liveness and the fresh sample, and reconcile what the worker says it runs.

    An execution handed to this worker long enough ago that it must have arrived, but
    which the worker does not report running, was lost on the way (a claim response
    dropped by a proxy, say): it goes back to the queue instead of waiting forever.
    Returns (state, executions to cancel, whether anything was requeued).
    """
    now = time.time()
    worker.last_heartbeat_at = now
    worker.state = ONLINE
    if body.resources is not None:
        _store_resources(worker, body.resources, body.metrics)
    reported = set(body.running)
    settled = now - LOST_AFTER_HEARTBEATS * worker.heartbeat_interval - LOST_SLACK
    held = []
    requeued = False
    for execution in executions.held_by(session, worker.name):
        if execution.delivered and execution.id not in reported and (execution.claimed_at or now) < settled:
            executions.reschedule(session, execution, f"worker {worker.name} does not report it running (claim lost)")
            requeued = True
        else:
            held.append(execution)
    cancel = [e.id for e in held if e.state == executions.S.CANCELLING.value]
    return display_state(worker, len(held)), cancel, requeued


def display_state(worker: WorkerModel, running: int) -> str:
    """ONLINE, STALE or OFFLINE; a draining live worker shows DRAINING, then DRAINED once idle."""
    if worker.state != ONLINE or not worker.draining:
        return worker.state
    return DRAINING if running else DRAINED


def set_draining(session: Session, name: str, draining: bool) -> WorkerInfo:
    worker = get(session, name)
    worker.draining = draining
    session.flush()
    return info(worker, running_counts(session).get(name, 0))


def restart_grace(session: Session) -> None:
    """After a server restart, give every known worker a full grace period to reconnect."""
    now = time.time()
    for worker in session.scalars(select(WorkerModel).where(WorkerModel.state != OFFLINE)):
        worker.last_heartbeat_at = max(worker.last_heartbeat_at, now)


def release(session: Session, worker: WorkerModel, reason: str) -> list[str]:
    """A worker leaves (shutdown or eviction): revoke its session and requeue its work."""
    worker.state = OFFLINE
    worker.session_token_hash = hash_token(secrets.token_urlsafe(32))
    held = executions.held_by(session, worker.name)
    for execution in held:
        executions.reschedule(session, execution, reason)
    return [e.id for e in held]


def sweep(session: Session, eviction_grace_period: float) -> list[str]:
    """Mark silent workers STALE and evict those silent past the grace period."""
    now = time.time()
    evicted = []
    for worker in session.scalars(select(WorkerModel).where(WorkerModel.state != OFFLINE)):
        silent = now - worker.last_heartbeat_at
        if silent > eviction_grace_period:
            release(session, worker, f"worker {worker.name} evicted: no heartbeat for {silent:.1f}s")
            evicted.append(worker.name)
        elif silent > worker.heartbeat_interval * STALE_AFTER_MISSED and worker.state == ONLINE:
            worker.state = STALE
    return evicted


def running_counts(session: Session) -> dict[str, int]:
    rows = session.execute(
        select(ExecutionModel.worker_name, func.count())
        .where(ExecutionModel.state.in_(HOLDING_STATES))
        .group_by(ExecutionModel.worker_name)
    )
    return {name: count for name, count in rows}


def get(session: Session, name: str) -> WorkerModel:
    worker = session.scalars(select(WorkerModel).where(WorkerModel.name == name)).first()
    if worker is None:
        raise NotFound(f"worker {name!r} is not registered")
    return worker


def info(worker: WorkerModel, running: int, with_packages: bool = False) -> WorkerInfo:
    resources = None
    if worker.resources is not None:
        resources = {
            **_fields(worker.resources, RESOURCE_FIELDS),
            "metrics": worker.resources.metrics or {},
            "sampled_at": worker.resources.sampled_at,
            "gpus": [_fields(gpu, GPU_FIELDS) for gpu in worker.gpus],
        }
    runtime = _fields(worker.runtime, RUNTIME_FIELDS) if worker.runtime is not None else None
    return WorkerInfo(
        name=worker.name,
        state=display_state(worker, running),
        labels=worker.labels or {},
        max_concurrent_executions=worker.max_concurrent_executions,
        allocation=worker.allocation,
        custom_resources=worker.custom_resources or {},
        running=running,
        registered_at=worker.registered_at,
        last_heartbeat_at=worker.last_heartbeat_at,
        runtime=runtime,
        resources=resources,
        packages=[PackageInfo(name=p.name, version=p.version) for p in worker.packages] if with_packages else None,
    )


def list_workers(session: Session) -> list[WorkerInfo]:
    counts = running_counts(session)
    workers = session.scalars(select(WorkerModel).order_by(WorkerModel.name))
    return [info(w, counts.get(w.name, 0)) for w in workers]
