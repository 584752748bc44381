"""Row writes as Core statements, fenced by ``row_version`` (docs/latency.md).

The hot paths (a round's claims, a claim's delivery, a checkpoint that neither ends
the attempt nor the execution) write execution rows with Core statements built once,
not through the ORM's unit of work. Each row is written only at the ``row_version``
it was read at, as the ORM's version counter fences its writes: a row another writer
moved in between fails the unit with ``StaleDataError``; it is rolled back and runs
again (``Database.run``). The ORM object read before, if any, is told what was written.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.exc import StaleDataError
from sqlalchemy.sql.dml import Update

from flux.server.models import ExecutionModel

T = ExecutionModel.__table__

#: A checkpoint batch that neither ends the attempt nor the execution.
CHECKPOINTED = (
    update(T)
    .where(T.c.id == bindparam("b_id"), T.c.row_version == bindparam("b_version"))
    .values(
        checkpoint_batch=bindparam("b_checkpoint_batch"),
        last_seq=bindparam("b_last_seq"),
        state=bindparam("b_state"),
        started_at=bindparam("b_started_at"),
        progress_at=bindparam("b_progress_at"),
        row_version=T.c.row_version + 1,
    )
)


def write_all(session: Session, statement: Update, params: list[dict]) -> None:
    """``statement`` once for every row (one executemany: one pipelined batch on
    PostgreSQL), each at the version it was read at."""
    if not params:
        return
    written = session.execute(statement, params).rowcount
    if written != len(params):
        raise StaleDataError(f"{len(params) - written} of {len(params)} executions changed meanwhile")


def checkpointed(session: Session, execution: ExecutionModel, **changes: Any) -> None:
    """Write a checkpoint's changes to ``execution``'s row (``CHECKPOINTED``'s columns)."""
    write_all(
        session,
        CHECKPOINTED,
        [
            dict(
                b_id=execution.id,
                b_version=execution.row_version,
                **{f"b_{key}": value for key, value in changes.items()},
            )
        ],
    )
    for key, value in changes.items():
        set_committed_value(execution, key, value)
    set_committed_value(execution, "row_version", execution.row_version + 1)
