"""Workers in the database: registration, status, leases, release and eviction.

A worker is ONLINE while it heartbeats, STALE once it has missed a few (dispatch
skips it), and OFFLINE once it is evicted after ``eviction_grace_period``: its
session token is revoked and everything it held goes back to SCHEDULED, to resume
elsewhere from the event log. An evicted worker that comes back must register again.

Liveness is judged in memory (``flux.server.registry``); this module writes only
what must outlive the process: registration, a resources sample that moved
materially, the lease now and then, and the end of a worker.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import time
from typing import Callable

from sqlalchemy import Row, bindparam, func, insert, select, update
from sqlalchemy.orm import Session, selectinload
from sqlalchemy.sql.dml import Insert

from flux.domain.attempts import AttemptEnd
from flux.domain.events import HOLDING_STATES
from flux.domain.hooks import HookEventType
from flux.domain.policy import ExecutionPolicy
from flux.domain.workers import Liveness, WorkerState
from flux.server import executions, outbox
from flux.server.errors import Conflict, NotFound
from flux.server.models import (
    ExecutionModel,
    PackageModel,
    PackageSetModel,
    WorkerModel,
    WorkerResourcesModel,
    WorkerRuntimeModel,
)
from flux.server.registry import Held, Member
from flux.server.resources import gpu_allotments, row_values, store_gpus, stored_sample
from flux.server.schemas import PackageInfo, WorkerInfo, WorkerRegistration

#: A delivered execution the worker has not reported for this many heartbeats (plus
#: slack for a slow claim response) is taken as lost in transit.
LOST_AFTER_HEARTBEATS, LOST_SLACK = 3, 2.0

RUNTIME_FIELDS = ("python_version", "os_name", "os_version", "hostname", "cpu_arch")


def _fields(row: object, names: tuple[str, ...]) -> dict:
    return {name: getattr(row, name) for name in names}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def settle_time(heartbeat_interval: float) -> float:
    """How long after delivery an execution must show up in the worker's heartbeats."""
    return LOST_AFTER_HEARTBEATS * heartbeat_interval + LOST_SLACK


def packages_digest(packages: list[PackageInfo]) -> str:
    text = "\n".join(sorted(f"{p.name}=={p.version}" for p in packages))
    return hashlib.sha256(text.encode()).hexdigest()


# --- status ----------------------------------------------------------------------------


# --- registration ----------------------------------------------------------------------


def store_package_set(session: Session, digest: str, packages: list[PackageInfo]) -> None:
    """Store a package set unless some worker reported it before: one statement for
    every worker of a fleet but the first. Sets are never changed or deleted, and
    concurrent registrations of a new set insert it once (the digest is the key:
    ``ON CONFLICT DO NOTHING`` waits for the other transaction, then skips)."""
    created = session.execute(_new_package_set(session.get_bind().dialect.name), {"digest": digest}).first()
    if created is not None and packages:
        session.execute(
            insert(PackageModel.__table__),  # Core executemany: no ORM bookkeeping per row
            [{"digest": digest, "name": p.name, "version": p.version} for p in packages],
        )


@functools.cache
def _new_package_set(dialect: str) -> Insert:
    """``INSERT ... ON CONFLICT DO NOTHING RETURNING digest`` in this dialect, built once."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    table = PackageSetModel.__table__
    return dialect_insert(table).on_conflict_do_nothing().returning(table.c.digest)


#: Registration's statements, built once: a registration storm passes only parameters
#: (building a statement from ``.values(**row)`` coerced and cache-keyed every value,
#: and the ORM's bulk insert path added its own bookkeeping, ~2/3 of the CPU it took).
_KNOWN = select(
    WorkerModel.id,
    WorkerModel.packages_digest,
    WorkerModel.draining,
    WorkerModel.state,
    WorkerModel.session_token_hash,
    WorkerModel.previous_token_hash,
).where(WorkerModel.name == bindparam("name"))
_NEW_WORKER = insert(WorkerModel.__table__).returning(WorkerModel.__table__.c.id)
_NEW_RUNTIME = insert(WorkerRuntimeModel.__table__)
_NEW_RESOURCES = insert(WorkerResourcesModel.__table__)


def register_worker(
    session: Session, body: WorkerRegistration, token: str, held_token: str | None, policy: ExecutionPolicy
) -> tuple[Member, list[str]]:
    """Create or refresh a worker; returns its registry member and executions to abandon.

    A name is bound to the session token its worker was given: re-registering a name
    that is not OFFLINE needs that token (``held_token``, which a restarted worker
    keeps on its host), else 409. Holding the bootstrap token is not enough to take
    over a live worker's claims and executions.

    Re-registering under a known name is a restart: what the old incarnation held and
    the new one does not report as running goes back to the queue at once, instead of
    waiting for eviction. Plain statements, not the ORM's unit of work, and packages
    are a set shared by digest (``store_package_set``): a fleet registering at once,
    or again after an outage, costs a few statements per worker.
    """
    now = time.time()
    digest = packages_digest(body.packages)
    row = _Registered(body, hash_token(token), digest, now)
    known = session.execute(_KNOWN, {"name": body.name}).first()
    _refuse_a_live_name(known, body.name, held_token)
    held: dict[str, Held] = {}  # a new worker holds nothing
    if known is None:
        worker_id, draining = _insert_worker(session, body, row), False
    else:
        worker_id, draining = known.id, known.draining
        _refresh_worker(session, known, body, row)
        held = held_map(_requeue_unreported(session, body, policy))
    if known is None or known.packages_digest != digest:
        store_package_set(session, digest, body.packages)
    outbox.fleet_event(session, HookEventType.WORKER_ONLINE, body.name, labels=body.labels, restarted=known is not None)
    member = Member(
        id=worker_id,
        name=body.name,
        token_hash=row.values["session_token_hash"],
        heartbeat_interval=body.heartbeat_interval,
        last_seen=now,
        draining=draining,
        sample=row.sample,
        metrics=dict(body.metrics),
        gpu_rows=bool(body.resources.gpus),
        held=held,
        work_hint=False,  # nothing undelivered can be waiting: what it did not report was requeued above
        last_claim_check=now,  # so its first claim waits for a wake-up instead of reading what it holds
    )
    return member, sorted(set(body.running) - set(held))


class _Registered:
    """What a registration writes: the worker's row, its runtime's and its resources'."""

    def __init__(self, body: WorkerRegistration, token_hash: str, digest: str, now: float):
        #: The ``workers`` row's columns a registration sets, new worker or restart.
        self.values = dict(
            state=WorkerState.ONLINE,
            session_token_hash=token_hash,
            labels=body.labels,
            max_concurrent_executions=body.max_concurrent_executions,
            allocation=body.allocation,
            custom_resources=body.custom_resources,
            namespaces=body.namespaces,
            heartbeat_interval=body.heartbeat_interval,
            registered_at=now,
            last_heartbeat_at=now,
            packages_digest=digest,
        )
        self.runtime = body.runtime.model_dump()
        self.sample = body.resources.model_dump()
        self.resources = {**row_values(self.sample), "metrics": body.metrics}


def _refuse_a_live_name(known: Row | None, name: str, held_token: str | None) -> None:
    """409 unless the name is free, OFFLINE, or re-registered with the token it was given."""
    proof = hash_token(held_token) if held_token else None
    if (
        known is not None
        and known.state != WorkerState.OFFLINE
        and (proof is None or proof not in (known.session_token_hash, known.previous_token_hash))
    ):
        raise Conflict(
            f"worker name {name!r} is held by another worker that is still online; stop it (it then releases "
            "the name), wait for its eviction, or choose another name"
        )


def _insert_worker(session: Session, body: WorkerRegistration, row: _Registered) -> int:
    """A new worker's rows; its id."""
    worker_id = session.execute(
        _NEW_WORKER, {"name": body.name, "resources_version": 1, "draining": False, **row.values}
    ).scalar_one()
    session.execute(_NEW_RUNTIME, {"worker_id": worker_id, **row.runtime})
    session.execute(_NEW_RESOURCES, {"worker_id": worker_id, **row.resources})
    if body.resources.gpus:
        store_gpus(session, [(worker_id, body.name, row.sample["gpus"])])
    return worker_id


def _refresh_worker(session: Session, known: Row, body: WorkerRegistration, row: _Registered) -> None:
    """A known worker's rows, as its new incarnation registered them (the old token kept as the previous one)."""
    worker_id = known.id
    session.execute(
        update(WorkerModel)
        .where(WorkerModel.id == worker_id)
        .values(
            resources_version=WorkerModel.resources_version + 1,
            previous_token_hash=known.session_token_hash,
            **row.values,
        )
    )
    session.execute(update(WorkerRuntimeModel).where(WorkerRuntimeModel.worker_id == worker_id).values(**row.runtime))
    session.execute(
        update(WorkerResourcesModel).where(WorkerResourcesModel.worker_id == worker_id).values(**row.resources)
    )
    store_gpus(session, [(worker_id, body.name, row.sample["gpus"])])


def _requeue_unreported(session: Session, body: WorkerRegistration, policy: ExecutionPolicy) -> list[ExecutionModel]:
    """A restart: what the old incarnation held and the new one does not run goes back to
    the queue (handed back if it never arrived, lost otherwise); what it still runs, kept."""
    still_running = set(body.running)
    kept = []
    for execution in executions.held_by(session, body.name):
        if not execution.delivered:
            executions.end_attempt(
                session,
                execution,
                AttemptEnd.HANDED_BACK,
                f"worker {body.name} restarted before it arrived",
                policy,
            )
        elif execution.id not in still_running:
            executions.end_attempt(
                session,
                execution,
                AttemptEnd.WORKER_LOST,
                f"worker {body.name} lost (restarted without it)",
                policy,
            )
        else:
            kept.append(execution)
    return kept


def member_for_token(session: Session, token_hash: str) -> Member | None:
    """The registry member for a session token the registry does not know yet."""
    worker = session.scalars(select(WorkerModel).where(WorkerModel.session_token_hash == token_hash)).first()
    if worker is None or worker.state == WorkerState.OFFLINE:
        return None
    sample = stored_sample(worker) if worker.resources is not None else None
    return Member(
        id=worker.id,
        name=worker.name,
        token_hash=token_hash,
        heartbeat_interval=worker.heartbeat_interval,
        last_seen=worker.last_heartbeat_at,
        via_lease=True,  # heard of here through the database, until it beats here
        draining=worker.draining,
        sample=sample,
        metrics=dict(worker.resources.metrics or {}) if worker.resources is not None else None,
        resources_version=worker.resources_version,
        gpu_rows=bool(worker.gpus),
        held=None,
    )


# --- what a worker holds ---------------------------------------------------------------


def held_map(executions_held: list[ExecutionModel]) -> dict[str, Held]:
    return {
        e.id: Held(e.state, e.delivered, e.claimed_at, e.attempt, e.preempt_deadline, e.preempted_by)
        for e in executions_held
    }


def reconcile(
    session: Session, member: Member, reported: set[str], policy: ExecutionPolicy, interval: float
) -> tuple[dict[str, Held], bool, bool]:
    """Compare what the worker reports running with what it holds.

    An execution handed to this worker long enough ago that it must have arrived, but
    which the worker does not report running, was lost on the way (a claim response
    dropped by a proxy, say): it goes back to the queue instead of waiting forever.
    ``interval``: the one it beats at. Returns (what it holds now, whether it is
    draining, whether anything was requeued).
    """
    now = time.time()
    settled = now - settle_time(interval)
    kept = []
    requeued = False
    for execution in executions.held_by(session, member.name):
        if execution.delivered and execution.id not in reported and (execution.claimed_at or now) < settled:
            cause = f"worker {member.name} does not report it running (claim lost)"
            executions.end_attempt(session, execution, AttemptEnd.HANDED_BACK, cause, policy)
            requeued = True
        else:
            kept.append(execution)
    draining = bool(session.scalar(select(WorkerModel.draining).where(WorkerModel.id == member.id)))
    return held_map(kept), draining, requeued


def live_state(stored: str, liveness: Liveness | None) -> str:
    """OFFLINE as the database says; otherwise ONLINE or STALE as the registry knows it."""
    return stored if stored == WorkerState.OFFLINE or liveness is None else liveness.state


def shown_state(stored: str, draining: bool, liveness: Liveness | None, running: int) -> str:
    """What people see of a worker: its stored state, or its liveness as the registry
    knows it, and DRAINING/DRAINED while an operator or the worker itself drains it."""
    leaving = bool(liveness and liveness.leaving)
    return display_state(live_state(stored, liveness), draining or leaving, running)


def display_state(state: str, draining: bool, running: int) -> str:
    """A draining live worker shows DRAINING, then DRAINED once idle."""
    if state == WorkerState.OFFLINE or not draining:
        return state
    return WorkerState.DRAINING if running else WorkerState.DRAINED


def set_draining(session: Session, name: str, draining: bool, liveness: Liveness | None) -> WorkerInfo:
    worker = get(session, name)
    worker.draining = draining
    session.flush()
    shown = show(session, name, liveness)
    if draining:
        outbox.worker_left(session, name)  # idle already: drained at once
    return shown


# --- leases and the end of a worker ----------------------------------------------------


def flush_leases(session: Session, heard: list[tuple[int, float]]) -> None:
    """Persist when each worker was last heard: one executemany UPDATE."""
    if heard:
        session.execute(update(WorkerModel), [{"id": worker_id, "last_heartbeat_at": at} for worker_id, at in heard])


def leases(session: Session) -> list:
    """Every worker's identity, state and lease: what a registry syncs from."""
    return session.execute(
        select(
            WorkerModel.id,
            WorkerModel.name,
            WorkerModel.state,
            WorkerModel.session_token_hash,
            WorkerModel.heartbeat_interval,
            WorkerModel.last_heartbeat_at,
            WorkerModel.draining,
            WorkerModel.resources_version,
        )
    ).all()


def release(session: Session, name: str, kind: AttemptEnd, cause: str, policy: ExecutionPolicy) -> list[str]:
    """A worker leaves (shutdown or eviction): revoke its session and end what it held."""
    session.execute(
        update(WorkerModel)
        .where(WorkerModel.name == name)
        .values(state=WorkerState.OFFLINE, session_token_hash=hash_token(secrets.token_urlsafe(32)))
    )
    held = executions.held_by(session, name)
    for execution in held:
        executions.end_attempt(
            session, execution, kind if execution.delivered else AttemptEnd.HANDED_BACK, cause, policy
        )
    return [e.id for e in held]


def hand_back_undelivered(session: Session, name: str, policy: ExecutionPolicy) -> list[str]:
    """A worker that is draining itself takes nothing more: what dispatch gave it that
    it has not received goes back to the queue at once."""
    undelivered = [e for e in executions.held_by(session, name) if not e.delivered]
    for execution in undelivered:
        executions.end_attempt(session, execution, AttemptEnd.HANDED_BACK, f"worker {name} is draining", policy)
    return [e.id for e in undelivered]


def evict_if_silent(
    session: Session, name: str, heard_after: float, cause: str, policy: ExecutionPolicy
) -> list[str] | None:
    """Evict unless the worker is already gone or another replica heard it since
    ``heard_after`` (its flushed lease is newer). Returns what was requeued, or None."""
    row = session.execute(
        select(WorkerModel.state, WorkerModel.last_heartbeat_at).where(WorkerModel.name == name)
    ).first()
    if row is None or row.state == WorkerState.OFFLINE or row.last_heartbeat_at > heard_after:
        return None
    requeued = release(session, name, AttemptEnd.WORKER_LOST, cause, policy)
    outbox.fleet_event(session, HookEventType.WORKER_EVICTED, name, reason=cause, requeued=requeued)
    return requeued


# --- reads -----------------------------------------------------------------------------


def running_counts(session: Session) -> dict[str, int]:
    rows = session.execute(
        select(ExecutionModel.worker_name, func.count())
        .where(ExecutionModel.state.in_(HOLDING_STATES))
        .group_by(ExecutionModel.worker_name)
    )
    return {name: count for name, count in rows}


def list_workers(
    session: Session, liveness: Callable[[str], Liveness | None], limit: int | None = None, after: str | None = None
) -> list[WorkerInfo]:
    """By name; ``limit`` of them after the name ``after``."""
    counts = running_counts(session)
    query = select(WorkerModel).order_by(WorkerModel.name).limit(limit)
    if after is not None:
        query = query.where(WorkerModel.name > after)
    workers = session.scalars(
        query.options(
            selectinload(WorkerModel.resources), selectinload(WorkerModel.gpus), selectinload(WorkerModel.runtime)
        )
    )
    return [info(w, counts.get(w.name, 0), liveness(w.name)) for w in workers]


def show(session: Session, name: str, liveness: Liveness | None) -> WorkerInfo:
    worker = get(session, name)
    shown = info(worker, running_counts(session).get(name, 0), liveness, with_packages=True)
    shown.gpu_allotments = gpu_allotments(session, name) if worker.gpus else []
    return shown


def get(session: Session, name: str) -> WorkerModel:
    worker = session.scalars(select(WorkerModel).where(WorkerModel.name == name)).first()
    if worker is None:
        raise NotFound(f"worker {name!r} is not registered")
    return worker


def info(worker: WorkerModel, running: int, liveness: Liveness | None, with_packages: bool = False) -> WorkerInfo:
    """``liveness``: from the registry, when it knows the worker."""
    resources = None
    if worker.resources is not None:
        resources = {
            **stored_sample(worker),
            "metrics": worker.resources.metrics or {},
            "sampled_at": worker.resources.sampled_at,
        }
    runtime = _fields(worker.runtime, RUNTIME_FIELDS) if worker.runtime is not None else None
    last_heard = worker.last_heartbeat_at if liveness is None else max(worker.last_heartbeat_at, liveness.last_heard)
    return WorkerInfo(
        name=worker.name,
        state=shown_state(worker.state, worker.draining, liveness, running),
        labels=worker.labels or {},
        max_concurrent_executions=worker.max_concurrent_executions,
        allocation=worker.allocation,
        custom_resources=worker.custom_resources or {},
        namespaces=worker.namespaces,
        running=running,
        registered_at=worker.registered_at,
        last_heartbeat_at=last_heard,
        runtime=runtime,
        resources=resources,
        packages=[PackageInfo(name=p.name, version=p.version) for p in worker.packages] if with_packages else None,
    )
