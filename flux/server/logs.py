"""An execution's output log (docs/logs.md): storing a worker's batches of lines, and
reading them back by page with filters.

Storing is fenced like a checkpoint (``flux.server.executions.lifecycle``): only the
worker holding the execution, under its current attempt, may write; that holds after
the attempt finished the workflow too (the execution keeps its holder and attempt),
so lines still in flight when it completed are kept. Batches are numbered per
attempt: a batch re-sent because its answer was lost is acknowledged without being
stored twice, one that skips a number is refused. Each accepted batch is one
executemany, numbered after the execution's ``last_log_seq`` in the same transaction,
so a reader that saw ``last_log_seq`` = N can be sure every line up to N exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from flux.domain.events import TASK_ID_MAX, ExecutionState
from flux.server.errors import Conflict
from flux.server.executions import fenced_row, get_row, info
from flux.server.models import ExecutionLogModel, ExecutionModel
from flux.server.schemas import ExecutionInfo, LogBatch, LogLineOut, LogPage

#: A longer message is cut to this many bytes of UTF-8 (and says so), not refused:
#: refusing would cost the worker the whole batch for one runaway line.
MAX_MESSAGE_BYTES = 64 * 1024
#: Column widths: a longer ``level`` or ``logger`` (both chosen by user code) is cut.
MAX_LEVEL, MAX_LOGGER = 16, 128
#: Standard ``logging`` level names (and their aliases) by rank, for the ``level`` filter.
LEVEL_RANKS = {"DEBUG": 10, "INFO": 20, "WARN": 30, "WARNING": 30, "ERROR": 40, "CRITICAL": 50, "FATAL": 50}

#: Built once: a statement made per call costs more to build than to run.
INSERT_LOG = insert(ExecutionLogModel.__table__)
L = ExecutionLogModel
COLUMNS = (L.seq, L.attempt, L.time, L.stream, L.task_id, L.level, L.logger, L.message)


def store(session: Session, worker_name: str, execution_id: str, body: LogBatch) -> int:
    """Append a worker's batch of lines; returns how many were stored (0 for a re-sent batch)."""
    execution = fenced_row(session, worker_name, execution_id, body.attempt)
    if body.batch <= execution.log_batch:
        return 0
    if body.batch != execution.log_batch + 1:
        raise Conflict(f"log batch {body.batch} of execution {execution_id} skips {execution.log_batch + 1}")
    execution.log_batch = body.batch
    if body.truncated:
        execution.log_truncated = True
    rows = []
    for line in body.lines:
        execution.last_log_seq += 1
        rows.append(
            {
                "execution_id": execution_id,
                "seq": execution.last_log_seq,
                "attempt": body.attempt,
                "time": line.time,
                "stream": line.stream,
                "level": _text(line.level, MAX_LEVEL),
                "logger": _text(line.logger, MAX_LOGGER),
                "task_id": _text(line.task_id, TASK_ID_MAX),
                "message": message_text(line.message),
            }
        )
    if rows:
        session.execute(INSERT_LOG, rows)  # autoflush writes the execution row first (its version check fences)
    return len(rows)


def message_text(message: str) -> str:
    """What is stored of a message: valid UTF-8 (a lone surrogate would fail the
    insert) and at most ``MAX_MESSAGE_BYTES`` of it, cut on a character boundary."""
    try:
        data = message.encode()
    except UnicodeEncodeError:
        data = message.encode("utf-8", "replace")
        message = data.decode()
    if len(data) <= MAX_MESSAGE_BYTES:
        return message
    kept = data[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")
    return f"{kept} [... {len(data) - MAX_MESSAGE_BYTES} more bytes cut by the server]"


def _text(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    return value.encode("utf-8", "replace").decode()[:limit]


@dataclass(frozen=True)
class LogFilter:
    """What ``GET /executions/{id}/logs`` narrows to; every field optional."""

    task: str | None = None
    attempt: int | None = None
    stream: str | None = None
    level: str | None = None

    def clauses(self) -> list:
        where = []
        if self.task:
            # A call id ('fetch:2') is exact; a task name matches each of its calls.
            where.append(
                L.task_id == self.task if ":" in self.task else L.task_id.startswith(self.task + ":", autoescape=True)
            )
        if self.attempt is not None:
            where.append(L.attempt == self.attempt)
        if self.stream:
            where.append(L.stream == self.stream)
        if self.level:
            rank = LEVEL_RANKS[self.level]
            where.append(L.stream == "log")
            where.append(L.level.in_(sorted(name for name, r in LEVEL_RANKS.items() if r >= rank)))
        return where


@dataclass(frozen=True)
class Chunk:
    """A page, with the execution as it was read just before its lines."""

    page: LogPage
    execution: ExecutionInfo
    #: ``limit`` lines came: more may follow at once.
    full: bool

    @property
    def ended(self) -> bool:
        """The execution is over and every line it had was read."""
        return ExecutionState(self.execution.state).is_terminal and not self.full


def read(
    session: Session, execution_id: str, filters: LogFilter, after: int, limit: int, namespace: str | None = None
) -> Chunk:
    """Lines after ``after``, oldest first. The execution row is read first, so every
    line up to its ``last_log_seq`` is visible to the query that follows (also under
    PostgreSQL's READ COMMITTED): a page that is not full then moves ``next_after`` up
    to it, and a filtered poll never scans the same lines twice."""
    row: ExecutionModel = get_row(session, execution_id, namespace)
    last, truncated, execution = row.last_log_seq, row.log_truncated, info(row)
    query = (
        select(*COLUMNS)
        .where(L.execution_id == execution_id, L.seq > after, *filters.clauses())
        .order_by(L.seq)
        .limit(limit)
    )
    lines = [LogLineOut(**r._mapping) for r in session.execute(query)]  # plain rows: a page is up to 5,000 of them
    full = len(lines) == limit
    next_after = lines[-1].seq if full else max(after, last, lines[-1].seq if lines else 0)
    return Chunk(LogPage(lines=lines, next_after=next_after, truncated=truncated), execution, full)
