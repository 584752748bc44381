"""``GET /watch/executions``: execution state changes, for the console's executions list
and any client that would otherwise poll the list. With ``follow=true`` or ``Accept:
text/event-stream`` (what every ``EventSource`` sends) a Server-Sent Events stream that
never ends on its own; otherwise one JSON answer, the changes after ``after`` and the
cursor to go on from (no ``after``: none, and the cursor of now).

Every change of an execution appends an event to its log, and event ids grow with each
insert across all executions: the stream's cursor is the last event id it looked at,
so a client that reconnects with ``Last-Event-ID`` misses nothing. One ``execution``
event per changed execution (``data``: an ``ExecutionChange``, ``id``: the cursor).

Followers wait on one notifier key, ``executions``, that ``relay`` raises whenever a
key about an execution or a worker's new work is notified (here or on another replica),
never by polling; bursts are coalesced (``COALESCE``), and each stream re-reads every
``FOLLOW_RECHECK`` seconds as a safety net.

On PostgreSQL an event id is taken at insert and a transaction can commit after one with
a greater id: ids skipped by a read are looked at again for ``GAP_TTL`` seconds.
"""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator, Callable

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session
from sse_starlette import EventSourceResponse, ServerSentEvent

from flux.domain.numbers import INT64_MAX
from flux.server import topics
from flux.server.auth import CLIENT
from flux.server.database import Database
from flux.server.errors import responses
from flux.server.log_routes import FOLLOW_RECHECK, LAST_EVENT_ID, PING, SEND_TIMEOUT, SEP, SSE, wants_stream
from flux.server.models import ExecutionEventModel, ExecutionModel
from flux.server.notify import Notifier
from flux.server.schemas import ExecutionChange, ExecutionChanges
from flux.server.scope import namespace
from flux.server.services import Services, services

#: The notifier key every follower waits on.
KEY = topics.EXECUTIONS
#: Seconds a stream lets wake-ups accumulate after a read (one read per burst).
COALESCE = 0.25
#: Event rows one read looks at; more are read at once after.
BATCH = 2000
#: Seconds a skipped event id is looked for again, and how many are kept.
GAP_TTL, MAX_GAPS = 10.0, 1000

STREAM = {
    **responses(401, 413, 422),
    200: {
        "description": f"JSON; with follow=true or 'Accept: {SSE}', Server-Sent Events: one 'execution' event per "
        "changed execution (id: the cursor, data: an ExecutionChange as JSON), never ending on its own",
        "content": {
            SSE: {
                "schema": {
                    "type": "object",
                    "required": ["event", "data", "id"],
                    "properties": {
                        "event": {"enum": ["execution"]},
                        "id": {"type": "string", "pattern": "^[0-9]+$"},
                        "data": {
                            "type": "string",
                            "contentMediaType": "application/json",
                            "contentSchema": {"$ref": "#/components/schemas/ExecutionChange"},
                        },
                    },
                }
            }
        },
    },
}


def relay(notifier: Notifier) -> Callable[[str], None]:
    """A notifier hook: raise ``executions`` after any key about an execution or new work,
    and ``fleet`` after those and a worker's sample or drain."""

    def hook(key: str) -> None:
        topic = topics.parse(key)
        if topic is not None and topic.kind in topics.ABOUT_EXECUTIONS:
            notifier.notify_local(KEY)
        if topic is not None and topic.kind in topics.ABOUT_FLEET:
            notifier.notify_local(topics.FLEET)

    return hook


router = APIRouter()


@router.get("/watch/executions", dependencies=CLIENT, responses=STREAM, response_model=ExecutionChanges)
async def watch_executions(
    request: Request,
    workflow: str | None = Query(default=None, max_length=128),
    state: str | None = Query(default=None, max_length=32),
    after: int | None = Query(
        default=None, ge=0, le=INT64_MAX, description="Changes after this cursor; default: from now"
    ),
    follow: bool = Query(default=False, description="Stream changes as Server-Sent Events"),
    last_event_id: int | None = LAST_EVENT_ID,
    ns: str = Depends(namespace),
    svc: Services = Depends(services),
):
    """The namespace's execution state changes, as JSON or Server-Sent Events (docs/console.md)."""
    db = svc.db
    if after is None and last_event_id is None:
        after = await db.read(newest_event_id)
    watch = Watch(max(after or 0, last_event_id or 0), ns, workflow, state.upper() if state else None)
    if not wants_stream(request, follow):
        changed, _ = await db.read(watch.read)
        return ExecutionChanges(changes=[change for _, change in changed], cursor=watch.cursor)
    content = _changes(db, svc.notifier, watch)
    return EventSourceResponse(content, ping=PING, sep=SEP, send_timeout=SEND_TIMEOUT)


def newest_event_id(session: Session) -> int:
    """The cursor of "now": a page that lists executions reads it first and follows from it."""
    return session.scalar(select(func.max(ExecutionEventModel.id))) or 0


class Watch:
    """One stream's cursor, its filters and the ids it skipped."""

    def __init__(self, cursor: int, namespace: str, workflow: str | None, state: str | None):
        self.cursor, self.namespace, self.workflow, self.state = cursor, namespace, workflow, state
        self.gaps: dict[int, float] = {}

    def read(self, session: Session) -> tuple[list[tuple[int, ExecutionChange]], bool]:
        """The executions changed since the cursor, each with its newest event id; and
        whether more events wait."""
        seen = or_(ExecutionEventModel.id > self.cursor, ExecutionEventModel.id.in_(list(self.gaps)))
        rows = session.execute(
            select(ExecutionEventModel.id, ExecutionEventModel.execution_id)
            .where(seen)
            .order_by(ExecutionEventModel.id)
            .limit(BATCH)
        ).all()
        self._advance([row.id for row in rows])
        newest: dict[str, int] = {}
        for row in rows:
            newest[row.execution_id] = row.id
        if not newest:
            return [], False
        query = select(ExecutionModel).where(
            ExecutionModel.id.in_(list(newest)), ExecutionModel.namespace == self.namespace
        )
        if self.workflow:
            query = query.where(ExecutionModel.workflow_name == self.workflow)
        if self.state:
            query = query.where(ExecutionModel.state == self.state)
        changed = [(newest[row.id], change(row)) for row in session.scalars(query)]
        return sorted(changed, key=lambda pair: pair[0]), len(rows) == BATCH

    def _advance(self, ids: list[int]) -> None:
        now = time.monotonic()
        for event_id in ids:
            self.gaps.pop(event_id, None)
        top = max(ids, default=self.cursor)
        if top > self.cursor:
            seen = set(ids)
            for skipped in range(self.cursor + 1, min(top, self.cursor + MAX_GAPS + 1)):
                if skipped not in seen:
                    self.gaps[skipped] = now
            self.cursor = top
        self.gaps = {i: at for i, at in self.gaps.items() if now - at < GAP_TTL}
        if len(self.gaps) > MAX_GAPS:
            self.gaps = dict(sorted(self.gaps.items())[-MAX_GAPS:])


def change(row: ExecutionModel) -> ExecutionChange:
    return ExecutionChange(
        id=row.id,
        workflow_name=row.workflow_name,
        workflow_version=row.workflow_version,
        state=row.state,
        worker_name=row.worker_name,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        error=row.error,
        scheduled_at=row.scheduled_at,
        claimed_at=row.claimed_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        gang_id=row.gang_id,
    )


async def _changes(db: Database, notifier: Notifier, watch: Watch) -> AsyncIterator[ServerSentEvent]:
    with notifier.subscribe(KEY) as woken:
        while not notifier.stopped:
            woken.clear()  # before reading: no wake-up falls between the read and the wait
            changed, more = await db.read(watch.read)
            for event_id, execution in changed:
                yield ServerSentEvent(execution.model_dump_json(), event="execution", id=str(event_id), sep=SEP)
            if more:
                continue
            await asyncio.sleep(COALESCE)
            await notifier.wait(woken, FOLLOW_RECHECK)
