"""Retention: finished executions older than a cut-off are deleted with their events
and log lines, a batch per transaction.

A batch is one short write transaction (500 executions), so checkpoints, claims and
dispatch interleave with a large prune instead of waiting behind it. The server prunes
on its own when ``--retention`` is set (every ``RETENTION_PERIOD``, and at start);
``flux execution prune --older-than 30d`` (``POST /executions/prune``) does it once.
Only finished executions go (``finished_at`` set: completed, failed, cancelled):
nothing queued or running is ever deleted (docs/history.md).
"""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

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


async def prune(db: Database, older_than: float, namespace: str | None = None) -> int:
    """Delete every execution (of ``namespace``; None: of all) that finished more than
    ``older_than`` seconds ago."""
    cutoff = time.time() - older_than
    deleted = 0
    while True:
        count = await db.run(lambda s: prune_batch(s, cutoff, namespace))
        deleted += count
        if count < BATCH:
            return deleted
        await asyncio.sleep(0)  # let the waiting writes in between batches


async def keep(db: Database, retention: float, period: float = RETENTION_PERIOD) -> None:
    """The server's own loop while ``--retention`` is set."""
    while True:
        try:
            deleted = await prune(db, retention)
            if deleted:
                log.info("retention: deleted %d executions finished more than %.0f s ago", deleted, retention)
        except Exception:  # noqa: BLE001 - a failed prune is retried next period, never fatal
            log.exception("retention prune failed; retrying in %.0f s", period)
        await asyncio.sleep(period)
