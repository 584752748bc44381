"""Listing the history of executions: filters, keyset pages, and what an item carries.

Newest first, ties broken by id: the page after ``(scheduled_at, id)`` is the range
below it on an index (``models.ExecutionModel``'s ``ix_executions_*_order``), so the
millionth execution costs what the first did; an ``offset`` would scan everything
before it. The cursor is opaque to clients (base64 of the last item's key) and stays
valid while executions are added or deleted. Items leave ``input`` and ``output``
out unless asked for (``include``): a page of large payloads is what made listing
slow, and a list is for finding, ``GET /executions/ID`` for reading (docs/history.md).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session, defer

from flux.domain.namespaces import DEFAULT
from flux.server import paging
from flux.server.errors import Invalid
from flux.server.executions.reads import PAYLOADS, info
from flux.server.models import ExecutionModel
from flux.server.schemas import ExecutionInfo


@dataclass(frozen=True)
class ExecutionFilter:
    #: A list is of one namespace: every list index leads with it.
    namespace: str = DEFAULT
    state: str | None = None
    workflow: str | None = None
    worker: str | None = None
    #: The runs a schedule started (docs/schedules.md).
    schedule: str | None = None
    #: Executions whose id starts with this (what the CLI resolves a typed prefix with).
    id_prefix: str | None = None
    #: Submitted at or after / before these times (Unix seconds).
    since: float | None = None
    until: float | None = None
    #: Gang members too (docs/gangs.md). Left out by default: a person finds a gang by its
    #: own row, whose ``GET`` lists them; a filter by worker or id prefix finds them anyway
    #: (a member is what holds a worker; an id typed is whichever execution it names).
    members: bool = False

    def apply(self, query):
        column = ExecutionModel
        query = query.where(column.namespace == self.namespace)
        if not (self.members or self.worker or self.id_prefix):
            # a residual filter on the rows an order's index yields, not a range of its own:
            # a page reads its rows plus the members among them (test_history's EXPLAIN tests)
            query = query.where(column.gang_id.is_(None))
        if self.id_prefix:
            query = query.where(column.id.startswith(self.id_prefix.lower(), autoescape=True))
        if self.state:
            query = query.where(column.state == self.state.upper())
        if self.workflow:
            query = query.where(column.workflow_name == self.workflow)
        if self.worker:
            query = query.where(column.worker_name == self.worker)
        if self.schedule:
            query = query.where(column.schedule == self.schedule)
        if self.since is not None:
            query = query.where(column.scheduled_at >= self.since)
        if self.until is not None:
            query = query.where(column.scheduled_at < self.until)
        return query


@dataclass(frozen=True)
class Page:
    items: list[ExecutionInfo]
    #: Pass as ``after`` for the next page; None on the last page.
    next_cursor: str | None


def encode_cursor(scheduled_at: float, execution_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([scheduled_at, execution_id]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        scheduled_at, execution_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if (
            isinstance(scheduled_at, (int, float))
            and not isinstance(scheduled_at, bool)
            and isinstance(execution_id, str)
        ):
            return float(scheduled_at), execution_id
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        pass
    raise Invalid(f"after: {cursor!r} is not a cursor this server gave (use the X-Next-Cursor of the previous page)")


def parse_include(include: str | None) -> frozenset[str]:
    wanted = frozenset(part.strip() for part in (include or "").split(",") if part.strip())
    unknown = wanted - set(PAYLOADS)
    if unknown:
        raise Invalid(f"include: unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(PAYLOADS)}")
    return wanted


def list_query(where: ExecutionFilter, limit: int, after: str | None = None, include: frozenset[str] = frozenset()):
    """The SELECT of one page (``limit`` rows) in keyset order."""
    query = where.apply(select(ExecutionModel)).order_by(ExecutionModel.scheduled_at.desc(), ExecutionModel.id.desc())
    if after is not None:
        query = query.where(tuple_(ExecutionModel.scheduled_at, ExecutionModel.id) < tuple_(*decode_cursor(after)))
    for name in PAYLOADS:
        if name not in include:
            query = query.options(defer(getattr(ExecutionModel, name)))
    return query.limit(limit)


def page(
    session: Session,
    where: ExecutionFilter,
    limit: int,
    after: str | None = None,
    include: frozenset[str] = frozenset(),
) -> Page:
    """One page of executions, newest first, and the cursor of the next."""
    rows = list(session.scalars(list_query(where, limit + 1, after, include)))  # one more: is there a next page?
    rows, cursor = paging.split(rows, limit, lambda row: encode_cursor(row.scheduled_at, row.id))
    return Page([info(row, include) for row in rows], cursor)
