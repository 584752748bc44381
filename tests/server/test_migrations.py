"""The Alembic migrations build exactly the schema the models describe, on SQLite and
PostgreSQL, and the newest ones can be undone."""

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

import flux.server.access_models  # noqa: F401 - its tables are part of Base.metadata
from flux.server.database import MIGRATIONS, migrate, normalise_url
from flux.server.models import Base


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
    url = f"sqlite:///{tmp_path / 'again.db'}"
    migrate(url)
    migrate(url)


def tables(url: str) -> set[str]:
    engine = create_engine(normalise_url(url))
    names = set(inspect(engine).get_table_names())
    engine.dispose()
    return names


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_tokens_and_audit_migration_goes_up_and_down(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'down.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    migrate(url)
    assert schema_diff(url) == []
    assert {"api_tokens", "audit_log"} <= tables(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", normalise_url(url))
    command.downgrade(config, "0014")
    assert not {"api_tokens", "audit_log"} & tables(url)
    migrate(url)
    assert schema_diff(url) == []
