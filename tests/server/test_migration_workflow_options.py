"""Migration 0025 gives each stored workflow version its options as one document, filled
from the columns that held them, and drops it on downgrade, the columns untouched: on
SQLite and on the real PostgreSQL. The document it fills is the one registration writes
(``WorkflowOptions.stored``), so re-registering an unchanged workflow after the upgrade
keeps its version."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from flux.domain.affinity import In
from flux.domain.concurrency import Concurrency
from flux.domain.routing import label, score
from flux.domain.workflow_options import WorkflowOptions
from flux.server.database import MIGRATIONS, normalise_url

#: Every option a version row held before 0025, set.
TRAIN = WorkflowOptions.of(
    "train",
    requests={"cpu": 2, "memory": "4Gi"},
    affinity={"zone": "a", "gpu": In(["a100"])},
    routing=score(label("zone") == "a"),
    pending_timeout=30,
    max_attempts=5,
    timeout=3600,
    priority="high",
    preemptible=False,
    min_runtime="10m",
    concurrency=Concurrency("customer:{input.id}", 2),
    max_concurrency=4,
)
#: The two versions as revision 0024 stored them: one with every option, one with none.
OLD_ROWS = [
    dict(
        id=1,
        name="train",
        requests={"cpu": 2.0, "memory": 4 * 1024**3},
        affinity={"zone": "a", "gpu": {"op": "In", "values": ["a100"]}},
        routing={"terms": [{"kind": "label_eq", "key": "zone", "value": "a", "weight": 1}]},
        pending_timeout=30.0,
        max_attempts=5,
        timeout=3600.0,
        contention={
            "priority": "high",
            "preemptible": False,
            "min_runtime": 600.0,
            "concurrency": {"key": "customer:{input.id}", "limit": 2},
            "max_concurrency": 4,
        },
    ),
    dict(
        id=2,
        name="plain",
        requests=None,
        affinity=None,
        routing=None,
        pending_timeout=None,
        max_attempts=None,
        timeout=None,
        contention=None,
    ),
]


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", normalise_url(url))
    return config


def _workflows(engine: sa.Engine) -> sa.Table:
    return sa.Table("workflows", sa.MetaData(), autoload_with=engine)


def _rows(engine: sa.Engine) -> dict[int, sa.Row]:
    table = _workflows(engine)
    with engine.connect() as connection:
        return {row.id: row for row in connection.execute(sa.select(table).order_by(table.c.id))}


def _fills_and_drops_the_document(url: str) -> None:
    config = _config(url)
    command.upgrade(config, "0024")
    engine = sa.create_engine(normalise_url(url))
    try:
        with engine.begin() as connection:
            connection.execute(
                _workflows(engine).insert(),
                [
                    dict(row, version=1, source="", source_digest="d" * 64, filename="flows.py", created_at=1.0)
                    for row in OLD_ROWS
                ],
            )

        command.upgrade(config, "head")
        rows = _rows(engine)
        assert rows[1].options == TRAIN.stored()
        assert WorkflowOptions.from_json(rows[1].options) == TRAIN
        assert rows[2].options == {"name": "plain"} == WorkflowOptions.of("plain").stored()
        assert WorkflowOptions.from_json(rows[2].options) == WorkflowOptions.of("plain")

        command.downgrade(config, "0024")
        back = _rows(engine)
        assert "options" not in _workflows(engine).c
        for old in OLD_ROWS:
            assert {name: getattr(back[old["id"]], name) for name in old} == old
    finally:
        engine.dispose()


def test_0025_on_sqlite(tmp_path):
    _fills_and_drops_the_document(f"sqlite:///{tmp_path / 'old.db'}")


def test_0025_on_postgresql(pg_url):
    _fills_and_drops_the_document(pg_url)
