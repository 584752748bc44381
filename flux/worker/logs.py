"""Shipping one attempt's log lines to the server (docs/logs.md, "Shipping").

The runner hands lines to ``LogShipper.put`` (its log sink); a task of the shipper's
own sends them as numbered batches to ``POST /executions/{id}/logs``: 1,000 lines (or
about 1 MiB) at a time, or whatever came in 0.2 s. Memory is bounded: ``put`` holds
the runner (which then stops reading the child's output, which then blocks on its
writes) while ``buffer_lines`` lines wait, in flight included.

Logs never decide an attempt's fate. The checkpoint path fences attempts; a refused
batch here (409/403: fenced; 404/405: a server without the logs route; any other
4xx) only stops shipping this attempt's lines. Order matters on the way out: the
outbox calls ``flush`` before the checkpoint that closes the attempt, because the
server refuses lines for an attempt that ended by a crash or a hand-back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from itertools import islice
from typing import Any, Awaitable, Callable

import httpx

from flux.worker.runners.ceilings import human_bytes
from flux.worker.session import Abandoned

log = logging.getLogger("flux.worker")

#: A batch leaves with this many lines or message bytes (at least one line)...
BATCH_LINES = 1000
BATCH_BYTES = 1024 * 1024
#: ... or this many seconds after the oldest line waiting.
BATCH_SECONDS = 0.2

#: Answers that say the attempt is no longer this worker's: its lines are dropped quietly.
FENCED = (403, 409)
#: Warn once per worker that its server does not take logs (an older server).
_warned_no_route = False


def _unrouted(text: str) -> bool:
    """FastAPI's answer for a path it does not route (a 404 may also be "no such execution")."""
    try:
        return json.loads(text).get("detail") == "Not Found"
    except ValueError:
        return False


def truncation_note(max_bytes: int) -> dict:
    return {
        "time": time.time(),
        "stream": "flux",
        "task_id": None,
        "level": None,
        "logger": None,
        "message": (
            f"log truncated: this attempt passed {human_bytes(max_bytes)} (max_log_bytes); later lines were dropped"
        ),
    }


def message_bytes(line: dict) -> int:
    return len(str(line.get("message") or "").encode("utf-8", "replace"))


class LogShipper:
    """One attempt's log lines, from the runner to the server, in order, at most once each
    (a retry inside ``call`` re-sends the same batch number, which the server keeps once)."""

    def __init__(
        self,
        call: Callable[..., Awaitable[Any]],
        execution_id: str,
        attempt: int,
        buffer_lines: int = 10_000,
        max_bytes: int = 10 * 1024**2,
        batch_lines: int = BATCH_LINES,
        interval: float = BATCH_SECONDS,
    ):
        self.call, self.execution_id, self.attempt = call, execution_id, attempt
        self.path = f"/executions/{execution_id}/logs"
        self.buffer_lines, self.max_bytes = max(buffer_lines, 1), max_bytes
        self.batch_lines, self.interval = max(min(batch_lines, self.buffer_lines), 1), interval
        #: Lines waiting or in flight; a line leaves once the server has it.
        self.pending: deque[dict] = deque()
        #: Batches sent for this attempt (numbered from 1).
        self.batches = 0
        #: Message bytes taken so far, against ``max_bytes``.
        self.bytes = 0
        #: Set once the cap was passed: the note is queued and later lines are dropped.
        self.truncated = False
        #: Set when the server refused a batch, or the attempt was abandoned: lines are dropped.
        self.stopped = False
        self._queued = 0  # lines ever queued
        self._done = 0  # lines that left the queue
        self._arrived = asyncio.Event()
        self._full = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._sending = asyncio.Lock()
        self._task: asyncio.Task | None = None

    async def put(self, lines: list[dict]) -> None:
        """The runner's log sink: returns once every line is queued or dropped."""
        for line in lines:
            if self.stopped or self.truncated:
                return
            if "\x00" in line.get("message", ""):  # the server's edge refuses NUL (a C extension wrote it)
                line = {**line, "message": line["message"].replace("\x00", "\ufffd")}
            size = message_bytes(line)
            if self.bytes + size > self.max_bytes:
                self.truncated = True
                self._queue(truncation_note(self.max_bytes))  # past the buffer's bound by one line
                return
            while len(self.pending) >= self.buffer_lines and not self.stopped:
                self._room.clear()
                await self._room.wait()  # back-pressure: the runner stops reading the child
            if self.stopped:
                return
            self.bytes += size
            self._queue(line)

    def _queue(self, line: dict) -> None:
        self.pending.append(line)
        self._queued += 1
        self._arrived.set()
        if len(self.pending) >= self.batch_lines:
            self._full.set()
        if self._task is None:  # runners that capture nothing never start one
            self._task = asyncio.create_task(self._ship())

    async def _ship(self) -> None:
        while not self.stopped:
            await self._arrived.wait()
            with contextlib.suppress(TimeoutError):  # a full batch leaves at once, a trickle every interval
                await asyncio.wait_for(self._full.wait(), self.interval)
            await self._send()

    async def flush(self) -> None:
        """Ship every line queued so far (not those that come meanwhile)."""
        target = self._queued
        while not self.stopped and self._done < target:
            await self._send()

    async def close(self) -> None:
        """The attempt is over: ship what is left, then stop."""
        await self.flush()
        self.stop()

    def abandon(self) -> None:
        """The attempt is not ours any more: drop what waits (a killed worker loses it too)."""
        self.stop()

    def stop(self) -> None:
        self.stopped = True
        self.pending.clear()
        self._room.set()
        if self._task is not None:
            self._task.cancel()

    async def _send(self) -> None:
        """One batch, in order: the lock keeps ``_ship`` and ``flush`` from numbering apart."""
        async with self._sending:
            if self.stopped or not self.pending:
                return
            lines, size = [], 0
            for line in islice(self.pending, self.batch_lines):
                size += message_bytes(line)
                if lines and size > BATCH_BYTES:
                    break
                lines.append(line)
            self.batches += 1
            body = {"attempt": self.attempt, "batch": self.batches, "lines": lines, "truncated": self.truncated}
            try:
                await self.call(self.path, body)
            except httpx.HTTPStatusError as exc:
                self._refused(exc.response.status_code, exc.response.text)
                return
            except Abandoned:
                self.stop()  # the worker stops waiting for the server
                return
            except Exception:  # noqa: BLE001 - logs must never take an attempt down
                log.exception(
                    "execution %s attempt %s: shipping logs failed; dropping the rest", self.execution_id, self.attempt
                )
                self.stop()
                return
            if self.stopped:  # abandoned meanwhile: the queue is gone
                return
            for _ in lines:
                self.pending.popleft()
            self._done += len(lines)
            if len(self.pending) < self.buffer_lines:
                self._room.set()
            if len(self.pending) < self.batch_lines:
                self._full.clear()
            if not self.pending:
                self._arrived.clear()

    def _refused(self, status: int, text: str) -> None:
        global _warned_no_route
        if status == 405 or (status == 404 and _unrouted(text)):
            if not _warned_no_route:
                _warned_no_route = True
                log.warning(
                    "the server does not take logs (HTTP %s on %s): this worker's log lines are dropped",
                    status,
                    self.path,
                )
        elif status in FENCED or status == 404:
            log.info(
                "execution %s attempt %s: log lines refused (%s); dropping the rest",
                self.execution_id,
                self.attempt,
                text,
            )
        else:
            log.warning(
                "execution %s attempt %s: log batch refused (HTTP %s: %s); dropping the rest",
                self.execution_id,
                self.attempt,
                status,
                text[:500],
            )
        self.stop()
