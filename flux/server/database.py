"""Database engine and the single place where the server touches it.

Every unit of work is a plain function of a ``Session`` run in a transaction on a
thread pool, so the event loop never blocks on I/O. Writes have writer threads that
commit the units queued together in one transaction (``groupcommit``): one on SQLite,
which allows one writer at a time anyway (they queue in memory instead of spinning on
``database is locked``); four on PostgreSQL, where one WAL flush for a group costs what
one unit's did and groups still commit side by side. Reads (``Database.read``) have
threads of their own and never wait for the writers (SQLite's WAL mode; PostgreSQL's
MVCC): three on SQLite, eight on PostgreSQL.

The database counts the statements it runs (reads and writes, for ``/metrics``: the
fleet's idle upkeep is meant to be zero statements, and tests check it) and how
long work waits for a thread (the server's own lag: it must not blame workers for
it, see ``flux.server.liveness``).

What must follow a commit, and only a commit, is one mechanism: ``Database.after_commit``
hooks, registered on this database's sessions (the metrics' finished executions, the
outbox's wake of the delivery loop). A transaction leaves what they need in
``session.info``; a rollback clears it, so a rolled-back or retried transaction
triggers nothing. Hooks are registered explicitly, per database, rather than by a
global listener on every ``Session`` (which runs for every commit of every database in
the process, and exists only because some module was imported): which work follows a
commit is then read in one place, ``flux.server.startup``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from flux.server.groupcommit import GroupWriter, Unit

T = TypeVar("T")
log = logging.getLogger("flux.server.database")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
#: Attempts for a transaction that lost a race to a concurrent writer.
RETRIES = 5
#: Writer threads on PostgreSQL: groups that commit side by side (SQLite has one).
PG_WRITERS = 4
#: PostgreSQL SQLSTATEs that mean "a concurrent transaction won; try again".
RETRYABLE_SQLSTATES = {"40001", "40P01", "23505"}


def _is_stale_connection(exc: Exception, completed: int) -> bool:
    """A pooled connection the database closed meanwhile (a restart, a failover, an
    idle timeout), found on the transaction's first statement: with no statement
    completed the transaction cannot have committed, so running it again on a fresh
    connection is safe. (A disconnect later in a transaction, at COMMIT say, may have
    committed: that one is not retried.)"""
    return completed == 0 and isinstance(exc, DBAPIError) and exc.connection_invalidated


def _is_conflict(exc: Exception) -> bool:
    if isinstance(exc, StaleDataError):
        return True
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return sqlstate in RETRYABLE_SQLSTATES


def normalise_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs and use the psycopg 3 driver for them."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if is_sqlite(url):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # noqa: ANN001
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    # No pre-ping (a round trip before every transaction, ~15 % of a burst's rate):
    # a connection found dead on its first statement is retried instead (Database.transaction).
    return create_engine(url, pool_size=10, max_overflow=10)


class StatementCounter:
    """Statements sent to the database, by kind; a thread may switch counting off.
    Also, per thread, how many completed since ``began`` (see ``_is_stale_connection``)."""

    def __init__(self) -> None:
        self.reads = 0
        self.writes = 0
        self._local = threading.local()

    def attach(self, engine: Engine) -> None:
        event.listen(engine, "before_cursor_execute", self._count)
        event.listen(engine, "after_cursor_execute", self._completed)

    def began(self) -> None:
        self._local.completed = 0

    def completed(self) -> int:
        return getattr(self._local, "completed", 0)

    def _completed(self, *_args) -> None:  # noqa: ANN002
        self._local.completed = getattr(self._local, "completed", 0) + 1

    def _count(self, _conn, _cursor, statement: str, _params, _context, executemany: bool) -> None:  # noqa: ANN001
        if getattr(self._local, "off", False):
            return
        if statement.lstrip()[:6].upper() in ("SELECT", "PRAGMA"):
            self.reads += 1
        else:
            self.writes += 1

    def uncounted(self, fn: Callable[[], T]) -> T:
        self._local.off = True
        try:
            return fn()
        finally:
            self._local.off = False


def migrate(url: str) -> None:
    """Bring the schema to the newest Alembic revision."""
    logging.getLogger("alembic").setLevel(
        logging.WARNING
    )  # its plugins and each revision, on every first start: nothing for people
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", normalise_url(url))
    command.upgrade(config, "head")


class Database:
    def __init__(self, url: str):
        self.url = normalise_url(url)
        self.engine = make_engine(self.url)
        self.statements = StatementCounter()
        self.statements.attach(self.engine)
        #: What every session finds in ``session.info`` (this replica's hook subscriptions:
        #: ``flux.server.outbox``), so a service function of a Session reaches it.
        self.context: dict = {}
        self._sessions = sessionmaker(self.engine, expire_on_commit=False, info=self.context)
        #: What runs after each commit of these sessions (``after_commit``), in registration order.
        self._committed: list[Callable[[Session], None]] = []
        #: The writer threads, committing what queued together at once (group commit:
        #: SQLite has one writer anyway; on PostgreSQL a commit waits for its WAL flush,
        #: one flush for a group costs what one unit's did, and a few groups commit at once).
        writers = 1 if is_sqlite(self.url) else PG_WRITERS
        self._writer = GroupWriter(self._sessions, self._alone, self._started, self.statements.uncounted, writers)
        self._pool = ThreadPoolExecutor(max_workers=3 if is_sqlite(self.url) else 8, thread_name_prefix="flux-db-read")
        #: Enqueue times of work not yet started on a thread (the oldest is the lag):
        #: writes, and reads.
        self._queued: dict[int, float] = {}
        self._queued_reads: dict[int, float] = {}
        self._next_ticket = 0
        #: The longest a unit of work waited for a thread, since it was last read.
        self.max_queue_wait = 0.0

    def after_commit(self, hook: Callable[[Session], None]) -> None:
        """``hook(session)`` after each commit of this database's sessions, and nothing
        after a rollback: what a transaction left in ``session.info`` for later."""
        if not self._committed:
            event.listen(self._sessions, "after_commit", self._after_commit)
            event.listen(self._sessions, "after_rollback", lambda session: session.info.clear())
        self._committed.append(hook)

    def _after_commit(self, session: Session) -> None:
        for hook in self._committed:
            hook(session)

    def transaction(self, fn: Callable[[Session], T]) -> T:
        """One transaction; retried when a concurrent writer (another replica) won a race.

        Execution rows are versioned (optimistic concurrency): the loser's UPDATE matches
        no row and raises StaleDataError; PostgreSQL may also report a serialization
        failure or deadlock. Service functions re-read what they change, so running
        them again on fresh state is safe.
        """
        for attempt in range(1, RETRIES + 1):
            self.statements.began()
            try:
                with self._sessions.begin() as session:
                    return fn(session)
            except (StaleDataError, IntegrityError, DBAPIError) as exc:
                if attempt < RETRIES and _is_stale_connection(exc, self.statements.completed()):
                    log.info("a pooled database connection was closed; retrying on a fresh one")
                    continue
                if attempt == RETRIES or not _is_conflict(exc):
                    raise
                log.info("transaction conflict (%s); retrying", type(exc).__name__)
                time.sleep(random.uniform(0, 0.01 * attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn(session)`` in one transaction off the event loop (maybe one shared with other
        units that queued with it; answered once committed)."""
        unit = Unit(fn, True, self._enqueue(self._queued))
        try:
            return await asyncio.wrap_future(self._writer.submit(unit))
        finally:
            self._queued.pop(unit.ticket, None)

    async def read(self, fn: Callable[[Session], T], counted: bool = True) -> T:
        """Like ``run`` for work that only reads: it never queues behind writes."""
        return await self._submit(fn, counted, self._queued_reads)

    def _enqueue(self, queued: dict) -> int:
        ticket = self._next_ticket
        self._next_ticket += 1
        queued[ticket] = time.monotonic()
        return ticket

    def _started(self, unit: Unit, queued: dict | None = None) -> None:
        """A unit left its queue for a thread: how long it waited is the server's lag."""
        waited = time.monotonic() - (self._queued if queued is None else queued).pop(unit.ticket, time.monotonic())
        self.max_queue_wait = max(self.max_queue_wait, waited)

    def _alone(self, unit: Unit) -> object:
        """A unit in a transaction of its own."""
        return (
            self.transaction(unit.fn) if unit.counted else self.statements.uncounted(lambda: self.transaction(unit.fn))
        )

    async def _submit(self, fn: Callable[[Session], T], counted: bool, queued: dict) -> T:
        unit = Unit(fn, counted, self._enqueue(queued))

        def started() -> T:
            self._started(unit, queued)
            return self._alone(unit)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, started)
        finally:
            queued.pop(unit.ticket, None)

    def backlog(self) -> tuple[int, float]:
        """(units of work waiting for the writer, seconds the oldest has waited)."""
        queued = list(self._queued.values())
        return len(queued), (time.monotonic() - min(queued)) if queued else 0.0

    def take_max_queue_wait(self) -> float:
        waited, self.max_queue_wait = self.max_queue_wait, 0.0
        return max(waited, self.backlog()[1])

    def close(self) -> None:
        self._writer.close()
        self._pool.shutdown(wait=True)
        self.engine.dispose()
