"""Database engine and the single place where the server touches it.

Every unit of work is a plain function of a ``Session`` run in a transaction on a
thread pool, so the event loop never blocks on I/O. SQLite allows one writer at a
time, so for SQLite the pool has one thread: writes queue in memory instead of
spinning on ``database is locked``. PostgreSQL gets a wider pool.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

T = TypeVar("T")
log = logging.getLogger("flux.server.database")

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
#: Attempts for a transaction that lost a race to a concurrent writer.
RETRIES = 5
#: PostgreSQL SQLSTATEs that mean "a concurrent transaction won; try again".
RETRYABLE_SQLSTATES = {"40001", "40P01", "23505"}


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
    return create_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True)


def migrate(url: str) -> None:
    """Bring the schema to the newest Alembic revision."""
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
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        workers = 1 if is_sqlite(self.url) else 8
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="flux-db")

    def transaction(self, fn: Callable[[Session], T]) -> T:
        """One transaction; retried when a concurrent writer (another replica) won a race.

        Execution rows are versioned (optimistic concurrency): the loser's UPDATE matches
        no row and raises StaleDataError; PostgreSQL may also report a serialization
        failure or deadlock. Service functions re-read what they change, so running
        them again on fresh state is safe.
        """
        for attempt in range(1, RETRIES + 1):
            try:
                with self._sessions.begin() as session:
                    return fn(session)
            except (StaleDataError, IntegrityError, DBAPIError) as exc:
                if attempt == RETRIES or not _is_conflict(exc):
                    raise
                log.info("transaction conflict (%s); retrying", type(exc).__name__)
                time.sleep(random.uniform(0, 0.01 * attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn(session)`` in one transaction off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.transaction, fn)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self.engine.dispose()
