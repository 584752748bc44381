"""Retention: finished executions older than a cut-off are deleted with their events
and log lines, and older audit rows too, a batch per transaction.

A batch is one short write transaction (500 executions), so checkpoints, claims and
dispatch interleave with a large prune instead of waiting behind it. The server prunes
on its own when ``--retention`` is set (every ``RETENTION_PERIOD``, and at start);
``flux execution prune --older-than 30d`` (``POST /executions/prune``) does it once.
Only finished executions go (``finished_at`` set: completed, failed, cancelled):
nothing queued or running is ever deleted (docs/history.md). The audit log is pruned
by the server's own loop only: no API call deletes an audit row (docs/security.md#audit).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from flux.server.access_models import AuditLogModel
from flux.server.database import Database
from flux.server.models import ExecutionEventModel, ExecutionModel

log = logging.getLogger("flux.server.retention")

BATCH = 500
#: Seconds between the server's own prunes when ``--retention`` is set.
RETENTION_PERIOD = 600.0

_OLDEST = (
    select(ExecutionModel.id)
    .where(ExecutionModel.finished_at.is_not(None))
    .order_by(ExecutionModel.finished_at)
    .limit(BATCH)
)


def delete_executions(session: Session, ids: list[str]) -> int:
    """Delete these executions with their events; their log lines go with them (``ON
    DELETE CASCADE``). Returns how many."""
    if ids:
        session.execute(delete(ExecutionEventModel).where(ExecutionEventModel.execution_id.in_(ids)))
        session.execute(delete(ExecutionModel).where(ExecutionModel.id.in_(ids)))
    return len(ids)


def prune_batch(session: Session, cutoff: float, namespace: str | None = None) -> int:
    """Delete up to ``BATCH`` executions that finished before ``cutoff``, oldest first
    (of ``namespace``; None: of all). Returns how many."""
    query = _OLDEST.where(ExecutionModel.finished_at < cutoff)
    if namespace is not None:
        query = query.where(ExecutionModel.namespace == namespace)
    return delete_executions(session, list(session.scalars(query)))


def prune_audit_batch(session: Session, cutoff: float) -> int:
    """Delete up to ``BATCH`` audit rows older than ``cutoff``, oldest first. Returns how many."""
    ids = list(
        session.scalars(
            select(AuditLogModel.id).where(AuditLogModel.time < cutoff).order_by(AuditLogModel.id).limit(BATCH)
        )
    )
    if ids:
        session.execute(delete(AuditLogModel).where(AuditLogModel.id.in_(ids)))
    return len(ids)


async def _in_batches(db: Database, batch: Callable[[Session], int]) -> int:
    deleted = 0
    while True:
        count = await db.run(batch)
        deleted += count
        if count < BATCH:
            return deleted
        await asyncio.sleep(0)  # let the waiting writes in between batches


async def prune(db: Database, older_than: float, namespace: str | None = None) -> int:
    """Delete every execution (of ``namespace``; None: of all) that finished more than
    ``older_than`` seconds ago."""
    cutoff = time.time() - older_than
    return await _in_batches(db, lambda s: prune_batch(s, cutoff, namespace))


async def prune_audit(db: Database, older_than: float) -> int:
    """Delete the audit rows older than ``older_than`` seconds (the server's loop only)."""
    cutoff = time.time() - older_than
    return await _in_batches(db, lambda s: prune_audit_batch(s, cutoff))


async def keep(db: Database, retention: float, period: float = RETENTION_PERIOD) -> None:
    """The server's own loop while ``--retention`` is set."""
    while True:
        try:
            deleted = await prune(db, retention)
            if deleted:
                log.info("retention: deleted %d executions finished more than %.0f s ago", deleted, retention)
            deleted = await prune_audit(db, retention)
            if deleted:
                log.info("retention: deleted %d audit rows older than %.0f s", deleted, retention)
        except Exception:  # noqa: BLE001 - a failed prune is retried next period, never fatal
            log.exception("retention prune failed; retrying in %.0f s", period)
        await asyncio.sleep(period)
