"""The routes of an execution's output: the worker's ``POST /executions/{id}/logs``, and
``GET /executions/{id}/logs`` and ``/events``, each a page of JSON or, with
``follow=true`` (or ``Accept: text/event-stream``), a Server-Sent Events stream that
ends with an ``end`` event once the execution is over (docs/logs.md).

A follower waits on the notifier (``logs:ID`` for new lines, ``events:ID`` for a
checkpoint, ``execution:ID`` for a change of state), never by polling: the database is read once per wake-up, plus a
safety re-read every ``FOLLOW_RECHECK`` seconds for a wake-up lost between replicas.
Its subscriptions live exactly as long as the stream: the generator holds them, and
sse-starlette cancels it when the client leaves; a stopping server
(``Notifier.stopped``) ends every stream at once, without ``end``, so clients
reconnect with ``Last-Event-ID`` to the next server.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable

from fastapi import APIRouter, Depends, Header, Query, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from flux.domain.events import TASK_ID_MAX, ExecutionState
from flux.domain.numbers import INT64_MAX
from flux.server import executions, logs, topics
from flux.server.auth import CLIENT, worker
from flux.server.errors import NotFound, responses
from flux.server.logs import LogFilter
from flux.server.notify import Notifier
from flux.server.registry import Member
from flux.server.schemas import (
    MAX_LOG_LINES,
    EventOut,
    ExecutionInfo,
    LogBatch,
    LogBatchReply,
    LogLevel,
    LogPage,
    LogStream,
)
from flux.server.scope import namespace
from flux.server.services import Services, services

#: A follower re-reads at least this often without a wake-up (the safety net).
FOLLOW_RECHECK = 5.0
#: A send a follower has not taken within this many seconds drops its stream (a client that stopped reading).
SEND_TIMEOUT = 60.0
#: A comment line this often keeps proxies from closing a quiet stream.
PING = 15.0
SSE = "text/event-stream"
#: One line per field, ``\n`` after each, a blank line after each event.
SEP = "\n"

WORKER = responses(401, 403, 404, 409, 413, 422)


def followable(kind: str, entry: str) -> dict:
    """OpenAPI answers of a route that can also stream: its ``text/event-stream`` schema
    describes one event (OpenAPI 3.1), its ``data`` the JSON of an entry or, for ``end``,
    of the execution."""
    data = {"anyOf": [{"$ref": f"#/components/schemas/{entry}"}, {"$ref": "#/components/schemas/ExecutionInfo"}]}
    event = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"enum": [kind, "end"]},
            "id": {"type": "string", "pattern": "^[0-9]+$", "description": f"The {kind}'s seq; none on 'end'"},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data},
        },
    }
    return {
        **responses(401, 404, 413, 422),
        200: {
            "description": f"JSON; with follow=true or 'Accept: {SSE}', Server-Sent Events: '{kind}' events "
            f"(data: a {entry}), then one 'end' (data: the ExecutionInfo) once the execution has ended",
            "content": {SSE: {"schema": event}},
        },
    }


FOLLOW = Query(default=False, description="Stream new entries as Server-Sent Events until the execution has ended")
LAST_EVENT_ID = Header(
    default=None,
    alias="Last-Event-ID",
    ge=0,
    le=INT64_MAX,
    description="Resume a stream after this seq (what an SSE client sends when it reconnects)",
)


@dataclass(frozen=True)
class Step:
    """What one read of a followed execution gives the stream."""

    #: (seq, the entry as JSON), oldest first.
    entries: list[tuple[int, str]]
    next_after: int
    #: More is waiting: read again without waiting.
    more: bool = False
    #: Set once the execution is over and everything was read: the ``end`` event's data.
    ended: ExecutionInfo | None = None


router = APIRouter()


@router.post("/executions/{execution_id}/logs", response_model=LogBatchReply, responses=WORKER)
async def post_logs(
    execution_id: str, body: LogBatch, member: Member = Depends(worker), svc: Services = Depends(services)
):
    """A worker's batch of captured lines, fenced like a checkpoint."""
    accepted = await svc.db.run(lambda s: logs.store(s, member.name, execution_id, body))
    if accepted:
        svc.notifier.notify(topics.logs(execution_id))
    return LogBatchReply(accepted=accepted)


@router.get(
    "/executions/{execution_id}/logs",
    response_model=LogPage,
    dependencies=CLIENT,
    responses=followable("log", "LogLineOut"),
)
async def execution_logs(
    execution_id: str,
    request: Request,
    task: str | None = Query(
        default=None, max_length=TASK_ID_MAX, description="A task name (each of its calls) or a call id ('fetch:2')"
    ),
    attempt: int | None = Query(default=None, ge=1, le=INT64_MAX),
    stream: LogStream | None = None,
    level: LogLevel | None = Query(default=None, description="Minimum level; only 'log' lines have one"),
    after: int = Query(default=0, ge=0, le=INT64_MAX, description="Lines with a greater seq"),
    limit: int = Query(default=1000, ge=1, le=MAX_LOG_LINES),
    follow: bool = FOLLOW,
    last_event_id: int | None = LAST_EVENT_ID,
    ns: str = Depends(namespace),
    svc: Services = Depends(services),
):
    filters = LogFilter(task=task, attempt=attempt, stream=stream, level=level)
    after = max(after, last_event_id or 0)
    if not wants_stream(request, follow):
        return (await svc.db.read(lambda s: logs.read(s, execution_id, filters, after, limit, ns))).page

    async def read(cursor: int) -> Step:
        chunk = await svc.db.read(lambda s: logs.read(s, execution_id, filters, cursor, limit, ns))
        entries = [(line.seq, line.model_dump_json()) for line in chunk.page.lines]
        return Step(entries, chunk.page.next_after, chunk.full, chunk.execution if chunk.ended else None)

    return await follow_stream(svc, execution_id, ns, (topics.Kind.LOGS, topics.Kind.EXECUTION), "log", read, after)


@router.get(
    "/executions/{execution_id}/events",
    response_model=list[EventOut],
    dependencies=CLIENT,
    responses=followable("event", "EventOut"),
)
async def execution_events(
    execution_id: str,
    request: Request,
    after: int = Query(default=0, ge=0, le=INT64_MAX),
    follow: bool = FOLLOW,
    last_event_id: int | None = LAST_EVENT_ID,
    ns: str = Depends(namespace),
    svc: Services = Depends(services),
):
    after = max(after, last_event_id or 0)
    if not wants_stream(request, follow):
        return await svc.db.read(lambda s: executions.events(s, execution_id, after, ns))

    async def read(cursor: int) -> Step:
        execution, events = await svc.db.read(lambda s: _events_after(s, execution_id, cursor, ns))
        ended = execution if ExecutionState(execution.state).is_terminal else None
        return Step([(e.seq, e.model_dump_json()) for e in events], events[-1].seq if events else cursor, ended=ended)

    return await follow_stream(svc, execution_id, ns, (topics.Kind.EVENTS, topics.Kind.EXECUTION), "event", read, after)


def _events_after(session, execution_id: str, after: int, namespace: str) -> tuple[ExecutionInfo, list[EventOut]]:  # noqa: ANN001
    """The execution first, then its events: a terminal state read here means its
    terminal event (appended in the same transaction) is among them."""
    return executions.get(session, execution_id, namespace), executions.events(session, execution_id, after, namespace)


def wants_stream(request: Request, follow: bool) -> bool:
    return follow or SSE in request.headers.get("accept", "")


async def follow_stream(
    svc: Services,
    execution_id: str,
    namespace: str,
    kinds: tuple[topics.Kind, ...],
    kind: str,
    read: Callable[[int], Awaitable[Step]],
    after: int,
) -> EventSourceResponse:
    """An SSE response of ``kind`` events (``id:`` the seq), then ``end``. An unknown
    execution (or one of another namespace) is a 404 here, before the stream starts."""
    await svc.db.read(lambda s: executions.get_row(s, execution_id, namespace))
    keys = tuple(topics.of(topic, execution_id) for topic in kinds)
    content = _entries(svc.notifier, keys, kind, read, after)
    return EventSourceResponse(content, ping=PING, sep=SEP, send_timeout=SEND_TIMEOUT)


async def _entries(
    notifier: Notifier, keys: tuple[str, ...], kind: str, read: Callable[[int], Awaitable[Step]], after: int
) -> AsyncIterator[ServerSentEvent]:
    with contextlib.ExitStack() as stack:
        woken = [stack.enter_context(notifier.subscribe(key)) for key in keys]  # before the first read
        while True:
            for event in woken:
                event.clear()  # before reading: no wake-up falls between the read and the wait
            try:
                step = await read(after)
            except NotFound:
                return  # deleted while followed
            for seq, data in step.entries:
                yield ServerSentEvent(data, event=kind, id=str(seq), sep=SEP)
            after = step.next_after
            if step.ended is not None:
                yield ServerSentEvent(step.ended.model_dump_json(), event="end", sep=SEP)
                return
            if notifier.stopped:
                return
            if not step.more:
                await _any(woken, FOLLOW_RECHECK)
            if notifier.stopped:
                return


async def _any(events: list[asyncio.Event], timeout: float) -> None:
    """Until one of ``events`` is set, or ``timeout``."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
