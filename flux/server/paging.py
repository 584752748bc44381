"""Keyset pages for every list endpoint: fetch one row more than asked, hand back the
cursor of the last row shown when there was more, and send it as ``X-Next-Cursor``
(plus a ``Link: rel="next"``). Lists ordered by a unique name (workers, workflows) use
the name as the cursor; executions encode their ``(scheduled_at, id)`` key
(``flux.server.executions.history``)."""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from fastapi import Request, Response

T = TypeVar("T")


def split(rows: Sequence[T], limit: int, cursor_of: Callable[[T], str]) -> tuple[list[T], str | None]:
    """The page (``limit`` of ``rows``, fetched with one more) and the next page's cursor."""
    if len(rows) > limit:
        return list(rows[:limit]), cursor_of(rows[limit - 1])
    return list(rows), None


def announce(request: Request, response: Response, cursor: str | None) -> None:
    if cursor:
        response.headers["X-Next-Cursor"] = cursor
        response.headers["Link"] = f'<{request.url.include_query_params(after=cursor)}>; rel="next"'
