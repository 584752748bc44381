"""Following an execution: its events and log lines as they are recorded.

``follow_events`` and ``follow_logs`` read the server's Server-Sent Events stream
(docs/logs.md) and resume after the last item they saw when the stream breaks;
against a server without the stream (404, 405, 406, or an answer that is not
``text/event-stream``) they fall back to polling with ``after=``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import httpx

from flux.client.errors import FluxConnectionError, error_from
from flux.client.urls import given, segment
from flux.domain.events import TERMINAL_STATES


@dataclass
class SSEMessage:
    event: str
    data: str
    id: str | None


def parse_sse(lines: Iterable[str]) -> Iterator[SSEMessage]:
    """Server-Sent Events from a stream's lines (the WHATWG event-stream format):
    ``field: value`` lines, a blank line ends a message, ``:`` starts a comment
    (a keep-alive), several ``data`` lines join with newlines, ``id`` persists."""
    event, data, last_id = "", [], None
    for line in lines:
        if not line:
            if data:
                yield SSEMessage(event or "message", "\n".join(data), last_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id" and "\0" not in value:
            last_id = value
    if data:  # a stream cut off after a message without its blank line: still worth having
        yield SSEMessage(event or "message", "\n".join(data), last_id)


def is_event_stream(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").split(";")[0].strip() == "text/event-stream"


class NoStream(Exception):
    """The server does not stream this (yet): poll instead."""


class Following:
    """The following half of ``FluxClient`` (it supplies ``_http``, ``_request``,
    ``scoped``, ``events``, ``logs_page``, ``execution`` and ``_unreachable``)."""

    #: Seconds a follow stream may stay silent before it is reopened (resuming after
    #: the last item), which also notices a server that vanished without closing it.
    stream_idle_timeout = 60.0
    #: Seconds between polls when the server has no stream to offer.
    poll_interval = 0.5
    #: Times in a row a broken stream is reopened before giving up.
    stream_retries = 5

    def logs(self, execution_id: str, after: int = 0, **filters: Any) -> Iterator[dict]:
        """Every captured line so far, page after page."""
        while True:
            lines, after = self._logs_after(execution_id, after, filters)
            if not lines:
                return
            yield from lines

    def follow_events(self, execution_id: str, after: int = 0) -> Iterator[dict]:
        """The execution's events as they are recorded, until it has ended and every
        event was sent (``GET /executions/{id}/events?follow=true``)."""
        yield from self._follow(
            execution_id, "events", "event", {}, after, lambda seq: self._events_after(execution_id, seq)
        )

    def follow_logs(self, execution_id: str, after: int = 0, **filters: Any) -> Iterator[dict]:
        """The execution's captured lines as they arrive, until it has ended and every
        line was sent (``GET /executions/{id}/logs?follow=true``); ``filters`` as ``logs``."""
        yield from self._follow(
            execution_id, "logs", "log", given(filters), after, lambda seq: self._logs_after(execution_id, seq, filters)
        )

    def _events_after(self, execution_id: str, after: int) -> tuple[list[dict], int]:
        events = self.events(execution_id, after)
        return events, (events[-1]["seq"] if events else after)

    def _logs_after(self, execution_id: str, after: int, filters: dict) -> tuple[list[dict], int]:
        page = self.logs_page(execution_id, after, **filters)
        lines = page.get("lines") or []
        return lines, page.get("next_after") or (lines[-1]["seq"] if lines else after)

    def _follow(
        self,
        execution_id: str,
        what: str,
        event: str,
        params: dict,
        after: int,
        page: Callable[[int], tuple[list[dict], int]],
    ) -> Iterator[dict]:
        seen = [after]  # the last seq yielded, kept by _stream as it goes
        try:
            yield from self._stream(self.scoped(f"/executions/{segment(execution_id)}/{what}"), event, params, seen)
            return
        except NoStream:
            pass
        yield from self._poll(execution_id, page, seen[0])

    def _stream(self, path: str, event: str, params: dict, seen: list[int]) -> Iterator[dict]:
        """One SSE stream, reopened after the last item when it breaks; returns at ``end``."""
        broken, streamed = 0, False
        while True:
            headers = {"Accept": "text/event-stream"}
            if seen[0]:
                headers["Last-Event-ID"] = str(seen[0])
            timeout = httpx.Timeout(self.timeout, read=self.stream_idle_timeout)
            query = {**params, "follow": "true", "after": seen[0]}
            try:
                with self._http.stream("GET", path, params=query, headers=headers, timeout=timeout) as response:
                    if response.status_code in (404, 405, 406) or (
                        response.status_code < 400 and not is_event_stream(response)
                    ):
                        raise NoStream()
                    if response.status_code >= 400:
                        response.read()
                        raise error_from(response)
                    streamed = True
                    for message in parse_sse(response.iter_lines()):
                        if message.event == "end":
                            return
                        if message.event == event:
                            item = json.loads(message.data)
                            seen[0] = item.get("seq") or int(message.id or seen[0])
                            broken = 0
                            yield item
            except (httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                failure: Exception = exc
            except httpx.TransportError as exc:
                if not streamed:  # never reached it: say so at once
                    raise self._unreachable(exc) from None
                failure = exc  # a server restarting, or a replica going away: try again
            else:
                failure = EOFError("the stream ended before its end event")
            broken += 1
            if broken > self.stream_retries:
                raise FluxConnectionError(f"the stream from {self.server_url}{path} keeps breaking: {failure}")
            time.sleep(min(0.2 * 2**broken, 5.0))

    def _poll(self, execution_id: str, page: Callable[[int], tuple[list[dict], int]], after: int) -> Iterator[dict]:
        """Page with ``after=`` until the execution has ended. Its state is read before
        the pages, so that a terminal state is only believed once its events are in."""
        execution = self.execution(execution_id)
        while True:
            while True:
                items, after = page(after)
                if not items:
                    break
                yield from items
            if execution["state"] in TERMINAL_STATES:
                return
            # a long poll: returns at once when the execution ends, else after poll_interval
            execution = self._request(
                "GET",
                self.scoped(f"/executions/{segment(execution_id)}"),
                params={"wait": self.poll_interval},
                timeout=self.poll_interval + self.timeout,
            )
