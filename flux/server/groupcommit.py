"""Group commit for the server's one writer thread (docs/fleet.md, "Group commit").

SQLite has one writer, so every write of the server queues for one thread; on
PostgreSQL a few such threads save a WAL flush per unit and still commit side by side
(docs/latency.md). A burst of
runs is a stream of small units of work (a submission, a claim, a checkpoint), and
about a third of what each cost that thread was the transaction around it: a session,
BEGIN, COMMIT and its WAL pages, the connection's return to the pool. Here the writer
takes every unit waiting when it gets to them (never waiting for more: an idle
server adds no latency) and runs them one after another in ONE transaction, each on
an empty identity map (``expunge_all``) and flushed on its own, as if each had its own
session. No unit is answered before the commit that made its writes durable.

When a unit raises (a fenced checkpoint, an unknown execution: answers, not faults),
the transaction rolls back; the units before it run again as a group, the failing unit
runs again alone in its own transaction (so what it answers is what it does on the
state it sees) and the units after it form the next group. Units are plain functions
of a session that re-read what they change: running one again on fresh state is what
``Database.transaction``'s retries already rely on.
"""

from __future__ import annotations

import collections
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from sqlalchemy.orm import Session

#: The most units one transaction carries: bounds how long the first one waits for its answer.
MAX_GROUP = 64


@dataclass
class Unit:
    fn: Callable[[Session], Any]
    counted: bool
    ticket: int
    future: Future = field(default_factory=Future)


class _Failed(Exception):
    def __init__(self, index: int):
        self.index = index


class GroupWriter:
    """Threads that run queued write units, those waiting together in one transaction:
    one on SQLite (one writer), a few on PostgreSQL (groups commit side by side)."""

    def __init__(
        self,
        sessions: Callable[[], Session],
        single: Callable[[Unit], Any],
        started: Callable[[Unit], None],
        uncounted: Callable[[Callable[[], Any]], Any],
        threads: int = 1,
    ):
        self._sessions = sessions  # a new session, not yet in a transaction
        self._single = single  # one unit in its own transaction, with the usual retries
        self._started = started  # a unit left the queue (queue-wait bookkeeping)
        self._uncounted = uncounted
        self._queue: collections.deque[Unit] = collections.deque()
        self._ready = threading.Condition()
        self._closed = False
        self.groups = 0  # transactions that carried more than one unit (tests, metrics)
        self._threads = [
            threading.Thread(target=self._loop, name="flux-db-writer", daemon=True) for _ in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, unit: Unit) -> Future:
        with self._ready:
            if self._closed:
                raise RuntimeError("the database is closed")
            self._queue.append(unit)
            self._ready.notify()
        return unit.future

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join()

    def _loop(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                units = [self._queue.popleft() for _ in range(min(MAX_GROUP, len(self._queue)))]
            units = [u for u in units if u.future.set_running_or_notify_cancel()]
            for unit in units:
                self._started(unit)
            if units:
                self._run(units)

    def _run(self, units: list[Unit]) -> None:
        while units:
            if len(units) == 1:
                self._alone(units[0])
                return
            try:
                results = self._together(units)
            except _Failed as failed:
                k = failed.index
                self._run(units[:k])
                self._alone(units[k])
                units = units[k + 1 :]
                continue
            except Exception:  # noqa: BLE001 - the commit itself failed: each unit on its own
                for unit in units:
                    self._alone(unit)
                return
            self.groups += 1
            for unit, result in zip(units, results):
                unit.future.set_result(result)
            return

    def _together(self, units: list[Unit]) -> list[Any]:
        results = []
        with self._sessions() as session, session.begin():
            for index, unit in enumerate(units):
                try:
                    results.append(self._call(unit, session))
                except Exception as exc:  # noqa: BLE001 - rolled back; the unit runs again alone
                    raise _Failed(index) from exc
        return results

    def _call(self, unit: Unit, session: Session) -> Any:
        def body() -> Any:
            session.expunge_all()  # each unit starts as in a session of its own
            result = unit.fn(session)
            session.flush()  # its writes fail here, as its own, not at the group's commit
            return result

        return body() if unit.counted else self._uncounted(body)

    def _alone(self, unit: Unit) -> None:
        try:
            result = self._single(unit)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            unit.future.set_exception(exc)
        else:
            unit.future.set_result(result)
