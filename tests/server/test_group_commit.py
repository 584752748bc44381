"""SQLite group commit (flux.server.groupcommit): units queued together share one
transaction; one that raises is refused alone and takes nothing else with it."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from flux.server.database import Database


@pytest.fixture
def db(tmp_path):
    database = Database(f"sqlite:///{tmp_path / 'g.db'}")
    database.engine.dispose()
    with database.engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)"))
    yield database
    database.close()


def insert(k: int):
    return lambda s: s.execute(text("INSERT INTO t (k, v) VALUES (:k, 'x')"), {"k": k}).rowcount


@pytest.mark.timeout(30)
def test_units_queued_together_commit_together_and_a_failing_one_fails_alone(db):
    async def main():
        # 1 twice: the second insert of it violates the key and must fail on its own.
        return await asyncio.gather(*(db.run(insert(k)) for k in (1, 2, 1, 3, 4)), return_exceptions=True)

    results = asyncio.run(main())
    assert [r for i, r in enumerate(results) if i != 2] == [1, 1, 1, 1]
    assert isinstance(results[2], Exception)
    rows = asyncio.run(db.read(lambda s: s.execute(text("SELECT k FROM t ORDER BY k")).scalars().all()))
    assert rows == [1, 2, 3, 4]
    assert db._writer.groups >= 1  # they did share transactions
