"""Namespaces in the database, and what a server process remembers of them
(docs/namespaces.md).

``NamespaceCache`` answers "does it exist, is it ACTIVE" for every namespaced request
without a query: it holds every namespace's state, read again when older than
``TTL`` (a namespace created or deleted on another replica sharing PostgreSQL is seen
within that), at once on a name it does not know (at most every ``MISS_TTL``: random
names cannot turn into a query each), and after this process creates or deletes one.
``default`` always exists and is never looked up.

Writes that put something new into a namespace check it in their own transaction
(``require_active``, ``FOR SHARE`` on PostgreSQL), so nothing lands in one being
deleted whatever a cache says; a run checks it in its workflow's read
(``flux.server.workflows.header``), at no extra query.
"""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import func, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from flux.domain.allotment import Allotment
from flux.domain.events import HOLDING_STATES, ExecutionState
from flux.domain.namespaces import DEFAULT, NamespaceState
from flux.domain.quotas import EXECUTIONS, NO_QUOTA, Quota
from flux.server import topics
from flux.server import usage as decayed_usage
from flux.server.database import Database
from flux.server.errors import Conflict, NotFound
from flux.server.models import ExecutionModel, NamespaceModel, ScheduleModel, WorkflowModel
from flux.server.namespace_schemas import NamespaceDetail, NamespaceInfo, NamespaceUpdate
from flux.server.service_models import SecretModel

UNFINISHED = [state.value for state in ExecutionState if not state.is_terminal]


def not_found(name: str) -> NotFound:
    return NotFound(f"namespace {name!r} not found")


def being_deleted(name: str) -> Conflict:
    return Conflict(f"namespace {name!r} is being deleted")


def _info(row: NamespaceModel) -> NamespaceInfo:
    return NamespaceInfo(
        name=row.name, state=row.state, created_at=row.created_at, weight=row.weight or 1.0, quota=row.quota
    )


def create(session: Session, name: str) -> NamespaceInfo:
    """409 when it exists, also when another replica creates it at the same instant."""
    row = dict(name=name, state=NamespaceState.ACTIVE.value, created_at=time.time())
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    if not session.execute(insert(NamespaceModel).values(**row).on_conflict_do_nothing()).rowcount:
        raise Conflict(f"namespace {name!r} already exists")
    return NamespaceInfo(**row)


def listed(session: Session) -> list[NamespaceInfo]:
    return [_info(row) for row in session.scalars(select(NamespaceModel).order_by(NamespaceModel.name))]


def get_row(session: Session, name: str, lock: bool = False) -> NamespaceModel:
    row = session.get(NamespaceModel, name, with_for_update=lock or None)
    if row is None:
        raise not_found(name)
    return row


def unfinished(session: Session, name: str) -> int:
    """Executions in it that have not finished (``ix_executions_namespace_state_order``)."""
    return (
        session.scalar(
            select(func.count())
            .select_from(ExecutionModel)
            .where(ExecutionModel.namespace == name, ExecutionModel.state.in_(UNFINISHED))
        )
        or 0
    )


def detail(session: Session, name: str, half_life: float = 0.0) -> NamespaceDetail:
    """What it holds: workflows, executions by state, schedules, secrets; its decayed usage
    (``half_life``: the server's ``--fair-share-half-life``) and the work preemptions lost."""
    row = get_row(session, name)

    def count(column) -> int:  # noqa: ANN001 - a column of a namespaced table
        return session.scalar(select(func.count(func.distinct(column))).where(column.table.c.namespace == name)) or 0

    by_state = dict(
        session.execute(
            select(ExecutionModel.state, func.count())
            .where(ExecutionModel.namespace == name)
            .group_by(ExecutionModel.state)
        ).all()
    )
    return NamespaceDetail(
        **_info(row).model_dump(),
        workflows=count(WorkflowModel.name),
        executions=by_state,
        unfinished=sum(n for state, n in by_state.items() if state in UNFINISHED),
        schedules=count(ScheduleModel.name),
        secrets=count(SecretModel.name),
        **usage(session, name),
        **_past(session, name, half_life),
    )


def _past(session: Session, name: str, half_life: float) -> dict:
    """Its decayed usage and the work its preemptions lost (``flux.server.usage``)."""
    past, share, lost = decayed_usage.shown(session, name, time.time(), half_life)
    return dict(usage=past, usage_share=share, fair_share_half_life=half_life, preemption_lost_seconds=lost)


def usage(session: Session, name: str) -> dict:
    """What its executions that hold a worker hold (their allotments' quantities, and how
    many: what its quota is compared with) and how many wait, by priority."""
    held: dict[str, float] = {}
    holding = 0
    for (allotment,) in session.execute(
        select(ExecutionModel.allotment).where(
            ExecutionModel.namespace == name,
            ExecutionModel.state.in_(HOLDING_STATES),
            ExecutionModel.worker_name.is_not(None),  # a gang's own row: its members hold
        )
    ):
        holding += 1
        for dimension, amount in Allotment.from_json(allotment).quantities.items():
            held[dimension] = held.get(dimension, 0) + amount
    waiting = session.execute(
        select(ExecutionModel.priority, func.count())
        .where(
            ExecutionModel.namespace == name,
            ExecutionModel.state == ExecutionState.SCHEDULED.value,
            ExecutionModel.gang_id.is_(None),  # what the queue holds: a gang once, not its members
        )
        .group_by(ExecutionModel.priority)
    ).all()
    return dict(held={**held, EXECUTIONS: holding}, waiting={str(priority): n for priority, n in waiting})


class RulesCache:
    """The namespaces' quotas and weights as placement reads them, kept between rounds:
    read again after a change (``topics.NAMESPACES``, notified here or by another
    replica: ``update_namespace``) and at least every ``TTL`` seconds, should a
    notification be lost. A change is seen by the first round after its notification,
    a few milliseconds after its commit, as if it had been made that much later."""

    TTL = 10.0

    def __init__(self) -> None:
        self._rules: tuple[dict[str, Quota], dict[str, float]] = ({}, {})
        self._read_at = float("-inf")
        #: Changes notified, and how many of them the copy saw (a change notified while a
        #: round read the rules is read again by the next).
        self._changes = self._seen = 0

    def get(self, session: Session) -> tuple[dict[str, Quota], dict[str, float]]:
        if self._seen != self._changes or time.monotonic() - self._read_at > self.TTL:
            changes = self._changes
            self._rules, self._read_at, self._seen = rules(session), time.monotonic(), changes
        return self._rules

    def on_notify(self, key: str) -> None:
        """A ``Notifier`` hook: some namespace's quota or weight changed."""
        if key == topics.NAMESPACES:
            self._changes += 1


def rules(session: Session) -> tuple[dict[str, Quota], dict[str, float]]:
    """Each namespace's quota (those that have one) and weight (those not 1): what placement reads."""
    rows = session.execute(
        select(NamespaceModel.name, NamespaceModel.weight, NamespaceModel.quota).where(
            or_(NamespaceModel.quota.is_not(None), NamespaceModel.weight != 1.0)
        )
    )
    quotas, weights = {}, {}
    for name, weight, quota in rows:
        if quota:
            quotas[name] = Quota.from_json(quota)
        if weight is not None and weight != 1.0:
            weights[name] = weight
    return quotas, weights


def update(session: Session, name: str, body: NamespaceUpdate, half_life: float = 0.0) -> NamespaceDetail:
    """Its weight and quota (docs/contention.md): what is given changes; the quota's keys
    given change and the others are kept (a merge patch); a null quota removes it. Answered
    as ``detail`` answers a read (``half_life``: the server's), so the two never differ."""
    row = get_row(session, name, lock=True)
    if body.weight is not None:
        row.weight = body.weight
    if "quota" in body.model_fields_set:
        change = body.quota_change()
        quota = change.applied_to(Quota.from_json(row.quota)) if change is not None else NO_QUOTA
        row.quota = quota.to_json() or None
    session.flush()
    return detail(session, name, half_life)


def replace_quota(session: Session, name: str, quota: Quota, half_life: float = 0.0) -> NamespaceDetail:
    """Its whole quota, replacing the one it had (an empty one removes it)."""
    row = get_row(session, name, lock=True)
    row.quota = quota.to_json() or None
    session.flush()
    return detail(session, name, half_life)


def require_active(session: Session, name: str) -> None:
    """In a write's transaction: 404 unless it exists, 409 while it is being deleted.
    ``FOR SHARE``: a delete waits for the write, then sees what it wrote."""
    if name == DEFAULT:
        return
    row = session.get(NamespaceModel, name, with_for_update={"read": True})
    if row is None:
        raise not_found(name)
    if row.state != NamespaceState.ACTIVE.value:
        raise being_deleted(name)


def states(session: Session) -> dict[str, str]:
    return dict(session.execute(select(NamespaceModel.name, NamespaceModel.state)).all())


class NamespaceCache:
    """Every namespace's state, in memory (see the module's docstring)."""

    #: Seconds a read stays good: how soon another replica's create or delete is seen.
    TTL = 1.0
    #: Seconds between reads caused by a name it does not know.
    MISS_TTL = 0.1

    def __init__(self) -> None:
        self._states: dict[str, str] = {}
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def state(self, db: Database, name: str) -> str | None:
        """Its state, or None when there is no such namespace."""
        if name == DEFAULT:
            return NamespaceState.ACTIVE.value
        age = time.monotonic() - self._read_at
        if age > self.TTL or (name not in self._states and age > self.MISS_TTL):
            await self._refresh(db)
        return self._states.get(name)

    async def _refresh(self, db: Database) -> None:
        asked = time.monotonic()
        async with self._lock:
            if self._read_at >= asked:  # another request read it while this one waited
                return
            self._states = await db.read(states, counted=False)
            self._read_at = time.monotonic()

    def forget(self) -> None:
        """This process changed the namespaces: the next request reads them again."""
        self._read_at = float("-inf")
