"""Migration 0015 moves each worker's sampled quantities from a column per dimension
into the capacity/available JSON mappings, and back on downgrade: on SQLite and on
the real PostgreSQL (FLUX_TEST_POSTGRES_URL)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from flux.server.database import MIGRATIONS, normalise_url

GiB = 1024**3
#: Two workers as revision 0014 stored them.
OLD_ROWS = [
    dict(
        worker_id=1,
        cpu_total=8.0,
        cpu_available=6.0,
        memory_total=32 * GiB,
        memory_available=16 * GiB,
        disk_total=500 * GiB,
        disk_free=100 * GiB,
        cpu_percent=12.5,
        metrics='{"q": 1.0}',
        sampled_at=1700000000.0,
    ),
    dict(
        worker_id=2,
        cpu_total=2.0,
        cpu_available=2.0,
        memory_total=2**62,
        memory_available=2**61,
        disk_total=1,
        disk_free=0,
        cpu_percent=0.0,
        metrics="{}",
        sampled_at=1700000001.0,
    ),
]


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", normalise_url(url))
    return config


def _columns(engine: sa.Engine) -> set[str]:
    return {column["name"] for column in sa.inspect(engine).get_columns("worker_resources")}


def _moves_the_rows_both_ways(url: str) -> None:
    config = _config(url)
    command.upgrade(config, "0014")
    engine = sa.create_engine(normalise_url(url))
    try:
        with engine.begin() as connection:
            for row in OLD_ROWS:
                connection.execute(
                    sa.text(
                        "INSERT INTO workers (id, name, state, session_token_hash, labels, max_concurrent_executions,"
                        " allocation, custom_resources, heartbeat_interval, registered_at, last_heartbeat_at,"
                        " resources_version, packages_digest, draining) VALUES (:id, :name, 'ONLINE', :token, '{}',"
                        " 1, 'sample', '{}', 5, 0, 0, 1, '', false)"
                    ),
                    {"id": row["worker_id"], "name": f"w{row['worker_id']}", "token": f"t{row['worker_id']}"},
                )
                names = ", ".join(row)
                connection.execute(
                    sa.text(f"INSERT INTO worker_resources ({names}) VALUES ({', '.join(':' + n for n in row)})"), row
                )

        command.upgrade(config, "head")
        assert {"capacity", "available"} <= _columns(engine)
        assert not {
            "cpu_total",
            "cpu_available",
            "memory_total",
            "memory_available",
            "disk_total",
            "disk_free",
        } & _columns(engine)
        table = sa.Table("worker_resources", sa.MetaData(), autoload_with=engine)
        with engine.connect() as connection:
            rows = {r.worker_id: r for r in connection.execute(sa.select(table).order_by(table.c.worker_id))}
        assert rows[1].capacity == {"cpu": 8.0, "memory": 32 * GiB, "disk": 500 * GiB}
        assert rows[1].available == {"cpu": 6.0, "memory": 16 * GiB, "disk": 100 * GiB}
        assert rows[2].capacity == {"cpu": 2.0, "memory": 2**62, "disk": 1}
        assert rows[2].available == {"cpu": 2.0, "memory": 2**61, "disk": 0}
        assert (rows[1].cpu_percent, rows[1].sampled_at) == (12.5, 1700000000.0)

        command.downgrade(config, "0014")
        with engine.connect() as connection:
            back = [
                dict(r._mapping)
                for r in connection.execute(
                    sa.text(
                        "SELECT worker_id, cpu_total, cpu_available, memory_total, memory_available,"
                        " disk_total, disk_free"
                        " FROM worker_resources ORDER BY worker_id"
                    )
                )
            ]
        assert back == [{name: row[name] for name in back[0]} for row in OLD_ROWS]
        assert "capacity" not in _columns(engine)
    finally:
        engine.dispose()


def test_0015_on_sqlite(tmp_path):
    _moves_the_rows_both_ways(f"sqlite:///{tmp_path / 'old.db'}")


def test_0015_on_postgresql(pg_url):
    _moves_the_rows_both_ways(pg_url)
