"""The queue as a dispatch round reads it: a page at a time, highest priority first, then
oldest first, with every waiting namespace represented on the first page
(docs/contention.md).

A page is one ordered read by the ``ix_executions_queue`` index.
A full first page may still leave out a namespace whose work is all newer than another
namespace's thousand oldest: its turn in fair share would never come while the fleet
stays full. So when the first page is full, the (priority, namespace) groups that wait
are listed (an index-only read of ``ix_executions_queue_groups``), and each group of a
priority the page reaches but missing from it adds its ``HEADS`` oldest (one indexed
read each, at most ``MAX_MISSING`` groups a round). A queue that fits in one page, or
whose first page holds every namespace, costs no more than one read. (A window function
ranking every namespace's queue did this in one statement, at ten times the cost of the
plain read with 10,000 waiting; a page of every group's slice, five times.)
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.events import ExecutionState
from flux.server.models import ExecutionModel

#: How many queued executions one page holds.
PAGE_SIZE = 1000
#: What each namespace missing from a full first page adds to it, and how many such groups at most.
HEADS, MAX_MISSING = 10, 200

#: What a round reads of each queued execution.
COLUMNS = (
    ExecutionModel.id,
    ExecutionModel.requests,
    ExecutionModel.affinity,
    ExecutionModel.routing,
    ExecutionModel.namespace,
    ExecutionModel.scheduled_at,
    ExecutionModel.placement_note,
    ExecutionModel.unschedulable,
    ExecutionModel.ready_at,
    ExecutionModel.priority,
    ExecutionModel.priority_class,
    ExecutionModel.concurrency,
    ExecutionModel.gang,
)
#: A gang waits as its own row; its members are never queued alone (docs/gangs.md).
QUEUED = (ExecutionModel.state == ExecutionState.SCHEDULED.value) & ExecutionModel.gang_id.is_(None)
#: Locked on PostgreSQL: replicas placing at once split the queue instead of colliding
#: (SQLite has one writer and renders no FOR UPDATE).
_ORDERED = (
    select(*COLUMNS)
    .where(QUEUED)
    .order_by(ExecutionModel.priority.desc(), ExecutionModel.scheduled_at, ExecutionModel.id)
    .with_for_update(skip_locked=True, of=ExecutionModel)
)


#: The first page, built once (SQLAlchemy computes its cache key once, not per round).
_FIRST = _ORDERED.limit(PAGE_SIZE)


class Page(NamedTuple):
    #: Highest priority first, then oldest first; none that an earlier page of the round held.
    rows: list
    #: Whether a later page holds more.
    more: bool


def page(session: Session, number: int, seen: set[str]) -> Page:
    """Page ``number`` of the queue; ``seen``: the ids earlier pages of this round held (kept up to date)."""
    rows = session.execute(_ORDERED.limit(PAGE_SIZE).offset(number * PAGE_SIZE) if number else _FIRST).all()
    more = len(rows) == PAGE_SIZE
    if number == 0 and more:
        rows += _missing_heads(session, rows)
    fresh = [row for row in rows if row.id not in seen]
    seen.update(row.id for row in fresh)
    return Page(sorted(fresh, key=lambda row: (-row.priority, row.scheduled_at, row.id)), more)


def _missing_heads(session: Session, rows: list) -> list:
    lowest = rows[-1].priority
    present = {(row.priority, row.namespace) for row in rows}
    groups = session.execute(
        select(ExecutionModel.priority, ExecutionModel.namespace)
        .where(QUEUED, ExecutionModel.priority >= lowest)
        .distinct()
    ).all()
    missing = sorted(((p, n) for p, n in groups if (p, n) not in present), key=lambda g: (-g[0], g[1]))[:MAX_MISSING]
    heads = []
    for priority, namespace in missing:
        heads += session.execute(
            _ORDERED.where(ExecutionModel.priority == priority, ExecutionModel.namespace == namespace).limit(HEADS)
        ).all()
    return heads


def lowest_waiting(session: Session) -> int | None:
    """The lowest priority that waits (the floor below which nobody is held back)."""
    return session.scalar(select(ExecutionModel.priority).where(QUEUED).order_by(ExecutionModel.priority).limit(1))
