"""Keyset pages for every list endpoint: fetch one row more than asked, hand back the
cursor of the last row shown when there was more, and send it as ``X-Next-Cursor``
(plus a ``Link: rel="next"``). Lists ordered by a unique name (workers, workflows) use
the name as the cursor; executions encode their ``(scheduled_at, id)`` key
(``flux.server.executions.history``)."""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from fastapi import Query, Request, Response

T = TypeVar("T")
#: Lists ordered by name (workers, workflows): a page, and the name to start after.
PAGE_LIMIT = Query(default=1000, ge=1, le=5000, description="Items in the page")
AFTER_NAME = Query(default=None, max_length=255, description="The X-Next-Cursor of the previous page")


def split(rows: Sequence[T], limit: int, cursor_of: Callable[[T], str]) -> tuple[list[T], str | None]:
    """The page (``limit`` of ``rows``, fetched with one more) and the next page's cursor."""
    if len(rows) > limit:
        return list(rows[:limit]), cursor_of(rows[limit - 1])
    return list(rows), None


def announce(request: Request, response: Response, cursor: str | None) -> None:
    if cursor:
        response.headers["X-Next-Cursor"] = cursor
        response.headers["Link"] = f'<{request.url.include_query_params(after=cursor)}>; rel="next"'


def by_name(request: Request, response: Response, rows: Sequence[T], limit: int) -> list[T]:
    """A page of a list ordered by name, its next cursor announced."""
    page, cursor = split(rows, limit, lambda row: row.name)
    announce(request, response, cursor)
    return page
