"""The task cache: results of ``cache=True`` tasks, shared by every execution of a
namespace (docs/tasks.md#cache, docs/namespaces.md).

Written on the checkpoint path: a TASK_CACHE_STORED event (``{"key", "ttl"}``) follows
the task's TASK_COMPLETED, and the server stores that result under the key in the
checkpoint's own transaction, so the cache never holds a result the log lacks, and a
fenced (superseded) attempt cannot write it. Read by a worker for its running attempt
(``POST /cache/lookup``). An entry past its ``expires_at`` is a miss; ``clear`` removes
entries (all, one task's, or the expired ones).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from flux.domain.events import HOLDING_STATES, EventType
from flux.domain.namespaces import DEFAULT
from flux.server.errors import Conflict, Invalid, NotFound
from flux.server.models import ExecutionEventModel, ExecutionModel
from flux.server.service_models import TaskCacheModel

STORED = EventType.TASK_CACHE_STORED.value
COMPLETED = EventType.TASK_COMPLETED.value


def lookup(session: Session, key: str, now: float | None = None, namespace: str = DEFAULT) -> tuple[bool, Any]:
    """(True, the result) for a live entry of ``namespace``, else (False, None)."""
    row = session.get(TaskCacheModel, (namespace, key))
    if row is None or (row.expires_at is not None and row.expires_at <= (now or time.time())):
        return False, None
    return True, row.value


def lookup_for(session: Session, worker_name: str, key: str, execution_id: str | None) -> tuple[bool, Any]:
    """A worker's lookup, in the namespace of the execution it names, which it must
    hold: it cannot read another namespace's entries. A worker older than namespaces
    names none: ``default``'s."""
    namespace = DEFAULT
    if execution_id is not None:
        execution = session.get(ExecutionModel, execution_id)
        if execution is None:
            raise NotFound(f"execution {execution_id!r} not found")
        if execution.worker_name != worker_name or execution.state not in HOLDING_STATES:
            raise Conflict(f"execution {execution_id} is not held by worker {worker_name!r}")
        namespace = execution.namespace
    return lookup(session, key, namespace=namespace)


def record(session: Session, execution: ExecutionModel, events: Sequence[Any]) -> int:
    """Store the results a checkpoint batch marks as cached; returns how many."""
    stored = 0
    for event in events:
        if event.type != STORED:
            continue
        key, ttl = _stored_value(event.value)
        result = _result_of(session, execution.id, event.task_id, events)
        now = event.time
        _upsert(
            session,
            dict(
                namespace=execution.namespace,
                key=key,
                task_name=event.name or "",
                value=result,
                created_at=now,
                expires_at=now + ttl if ttl else None,
                execution_id=execution.id,
            ),
        )
        stored += 1
    return stored


def _stored_value(value: Any) -> tuple[str, float | None]:
    if not isinstance(value, dict) or not isinstance(value.get("key"), str) or len(value["key"]) != 64:
        raise Invalid("TASK_CACHE_STORED needs a value {'key': 64 hex digits, 'ttl': seconds or null}")
    ttl = value.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0):
        raise Invalid("TASK_CACHE_STORED: ttl must be a number of seconds > 0 or null")
    return value["key"], ttl


def _result_of(session: Session, execution_id: str, task_id: str | None, batch: Sequence[Any]) -> Any:
    """The TASK_COMPLETED value the cache entry stores: in this batch, else in the log."""
    for event in reversed(batch):
        if event.type == COMPLETED and event.task_id == task_id:
            return event.value
    row = session.execute(
        select(ExecutionEventModel.value).where(
            ExecutionEventModel.execution_id == execution_id,
            ExecutionEventModel.type == COMPLETED,
            ExecutionEventModel.task_id == task_id,
        )
    ).first()
    if row is None:
        raise Invalid(f"TASK_CACHE_STORED for {task_id!r} without its TASK_COMPLETED")
    return row.value


def _upsert(session: Session, row: dict) -> None:
    """Insert, or replace the entry another execution stored under the same key meanwhile."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    statement = insert(TaskCacheModel).values(**row)
    updated = {
        name: statement.excluded[name] for name in ("task_name", "value", "created_at", "expires_at", "execution_id")
    }
    keys = [TaskCacheModel.namespace, TaskCacheModel.key]
    session.execute(statement.on_conflict_do_update(index_elements=keys, set_=updated))


def clear(
    session: Session,
    task: str | None = None,
    expired_only: bool = False,
    now: float | None = None,
    namespace: str = DEFAULT,
) -> int:
    """Delete entries of ``namespace`` (one task's with ``task``; only expired ones with ``expired_only``)."""
    statement = delete(TaskCacheModel).where(TaskCacheModel.namespace == namespace)
    if task is not None:
        statement = statement.where(TaskCacheModel.task_name == task)
    if expired_only:
        statement = statement.where(TaskCacheModel.expires_at <= (now or time.time()))
    return session.execute(statement).rowcount or 0
