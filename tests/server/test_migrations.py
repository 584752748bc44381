"""The Alembic migrations build exactly the schema the models describe, on SQLite and
PostgreSQL; the newest ones can be undone, and what an older schema held stays
readable after them."""

import sqlite3
import time
from types import SimpleNamespace

import httpx
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from shared import SOURCE
from sqlalchemy import MetaData, create_engine, inspect

import flux.server.access_models  # noqa: F401 - its tables are part of Base.metadata
import flux.server.hook_models  # noqa: F401 - and these
import flux.server.pool_models  # noqa: F401 - and the pools' tables
import flux.server.service_models  # noqa: F401 - so are these
from flux.server.database import MIGRATIONS, migrate, normalise_url
from flux.server.models import Base


def alembic(url: str) -> SimpleNamespace:
    """``upgrade(revision)`` and ``downgrade(revision)`` of this database."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", normalise_url(url))
    return SimpleNamespace(
        upgrade=lambda rev: command.upgrade(config, rev), downgrade=lambda rev: command.downgrade(config, rev)
    )


def schema_diff(url: str) -> list:
    engine = create_engine(normalise_url(url))
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    return diff


def test_migrations_match_models(tmp_path):
    url = f"sqlite:///{tmp_path / 'schema.db'}"
    migrate(url)
    assert schema_diff(url) == []


def test_migrating_twice_is_a_no_op(tmp_path):
    """The second run changes nothing: the same revision (the newest), the same schema
    statement for statement, and a row written between the two is still there."""
    path = tmp_path / "again.db"
    url = f"sqlite:///{path}"
    migrate(url)
    first = sqlite_schema(path)
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO namespaces (name, state, created_at) VALUES ('kept', 'ACTIVE', 0)")
    migrate(url)
    assert sqlite_schema(path) == first
    with sqlite3.connect(path) as db:
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
        assert db.execute("SELECT name FROM namespaces WHERE name = 'kept'").fetchall() == [("kept",)]
    assert revision == ScriptDirectory(str(MIGRATIONS)).get_current_head()


def sqlite_schema(path) -> list[tuple]:  # noqa: ANN001 - a path
    with sqlite3.connect(path) as db:
        return db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()


def inspected(url: str, read):  # noqa: ANN001, ANN201 - a function of SQLAlchemy's Inspector
    engine = create_engine(normalise_url(url))
    try:
        return read(inspect(engine))
    finally:
        engine.dispose()


def tables(url: str) -> set[str]:
    return inspected(url, lambda inspector: set(inspector.get_table_names()))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_tokens_and_audit_migration_goes_up_and_down(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'down.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    migrate(url)
    assert schema_diff(url) == []
    assert {"api_tokens", "audit_log"} <= tables(url)
    alembic(url).downgrade("0016")
    assert not {"api_tokens", "audit_log"} & tables(url)
    migrate(url)
    assert schema_diff(url) == []


def columns(url: str, table: str) -> set[str]:
    return inspected(url, lambda inspector: {column["name"] for column in inspector.get_columns(table)})


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize(
    ("table", "column", "before"), [("workers", "namespaces", "0017"), ("executions", "failure", "0018")]
)
def test_a_column_migration_goes_up_and_down(backend, table, column, before, tmp_path, request):
    """0018: workers.namespaces; 0021: executions.failure (docs/failures.md)."""
    url = f"sqlite:///{tmp_path / 'columns.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    migrate(url)
    assert column in columns(url, table)
    alembic(url).downgrade(before)
    assert column not in columns(url, table)
    migrate(url)
    assert schema_diff(url) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_pools_migration_goes_up_and_down(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'pools.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    migrate(url)
    assert {"pools", "pool_workers"} <= tables(url)
    alembic(url).downgrade("0018")
    assert not {"pools", "pool_workers"} & tables(url)
    migrate(url)
    assert schema_diff(url) == []


# --- 0016: namespaces (docs/namespaces.md) -----------------------------------------------


def _fill_before_namespaces(url: str, now: float) -> list[str]:
    """A database at 0014 (the head before namespaces) with a workflow, finished and
    queued executions with their events, a schedule and a cache entry."""
    engine = create_engine(normalise_url(url))
    tables = MetaData()
    tables.reflect(engine)
    ids = [f"{n:032x}" for n in range(1, 6)]
    states = ["COMPLETED", "FAILED", "CANCELLED", "SCHEDULED", "SCHEDULED"]
    with engine.begin() as connection:
        connection.execute(
            tables.tables["workflows"].insert(),
            [
                dict(
                    id=1,
                    name="etl",
                    version=1,
                    source=SOURCE,
                    source_digest="d" * 64,
                    filename="etl.py",
                    created_at=now,
                )
            ],
        )
        connection.execute(
            tables.tables["executions"].insert(),
            [
                dict(
                    id=execution_id,
                    workflow_id=1,
                    workflow_name="etl",
                    workflow_version=1,
                    state=state,
                    input={"n": n},
                    attempt=0,
                    crashes=0,
                    max_attempts=3,
                    version_pinned=False,
                    delivered=False,
                    last_seq=1,
                    checkpoint_batch=0,
                    last_log_seq=0,
                    log_batch=0,
                    log_truncated=False,
                    row_version=1,
                    scheduled_at=now + n,
                    finished_at=now + n if state not in ("SCHEDULED",) else None,
                )
                for n, (execution_id, state) in enumerate(zip(ids, states))
            ],
        )
        connection.execute(
            tables.tables["execution_events"].insert(),
            [
                dict(
                    execution_id=execution_id,
                    seq=1,
                    type="WORKFLOW_SCHEDULED",
                    name="etl",
                    value=None,
                    time=now,
                )
                for execution_id in ids
            ],
        )
        connection.execute(
            tables.tables["schedules"].insert(),
            [
                dict(
                    name="nightly",
                    workflow_name="etl",
                    cron="0 3 * * *",
                    anchor=0.0,
                    timezone="UTC",
                    overlap="skip",
                    catch_up="latest",
                    catch_up_limit=100,
                    jitter=0.0,
                    paused=True,
                    created_at=now,
                    updated_at=now,
                )
            ],
        )
        connection.execute(
            tables.tables["task_cache"].insert(), [dict(key="a" * 64, task_name="square", value=81, created_at=now)]
        )
    engine.dispose()
    return ids


def _settled(shown: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k not in ("placement_note", "unschedulable")} for e in shown]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_every_execution_stored_before_namespaces_is_readable_in_default(backend, make_cluster, tmp_path, request):
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'before.db'}"
    alembic(url).upgrade("0014")
    ids = _fill_before_namespaces(url, time.time() - 100)
    migrate(url)
    cluster = make_cluster(database_url=url)
    with httpx.Client(base_url=f"{cluster.server_url}/namespaces/default") as http:
        shown = [http.get(f"/executions/{execution_id}").json() for execution_id in ids]
        aliased = [httpx.get(f"{cluster.server_url}/executions/{execution_id}").json() for execution_id in ids]
        events = [http.get(f"/executions/{execution_id}/events").json() for execution_id in ids]
        listed = [e["id"] for e in http.get("/executions").json()]
        namespace = httpx.get(f"{cluster.server_url}/namespaces/default").json()
        schedule = http.get("/schedules/nightly").json()
        versions = http.get("/workflows/etl/versions").json()

    # a round may note why the queued ones wait between the two reads: the rest is the same
    assert [e["namespace"] for e in shown] == ["default"] * 5 and _settled(shown) == _settled(aliased)
    assert [e["input"] for e in shown] == [{"n": n} for n in range(5)]
    assert [log[0]["type"] for log in events] == ["WORKFLOW_SCHEDULED"] * 5  # the queued ones go on in default
    assert sorted(listed) == ids
    assert namespace["executions"] == {"COMPLETED": 1, "FAILED": 1, "CANCELLED": 1, "SCHEDULED": 2}
    assert namespace["workflows"] == 1 and namespace["schedules"] == 1 and namespace["unfinished"] == 2
    assert schedule["workflow"] == "etl" and [v["version"] for v in versions] == [1]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_hooks_migration_goes_up_and_down(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'hooks.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    migrate(url)
    assert schema_diff(url) == []
    assert {"hooks", "hook_deliveries", "hook_attempts"} <= tables(url)
    alembic(url).downgrade("0018")
    assert not {"hooks", "hook_deliveries", "hook_attempts"} & tables(url)
    migrate(url)
    assert schema_diff(url) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_preemption_costs_migration_goes_up_and_down(backend, tmp_path, request):
    """0024 (docs/contention.md): what preemption costs on executions, and namespace_usage."""
    url = f"sqlite:///{tmp_path / 'costs.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    added = {"min_runtime", "progress_at", "preempted_at", "preemption_lost_seconds"}
    migrate(url)
    assert "namespace_usage" in tables(url) and added <= columns(url, "executions")
    alembic(url).downgrade("0023")
    assert "namespace_usage" not in tables(url) and not added & columns(url, "executions")
    migrate(url)
    assert schema_diff(url) == []
