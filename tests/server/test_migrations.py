"""The Alembic migrations build exactly the schema the models describe."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from flux.server.models import Base
from flux.server.database import migrate


def test_migrations_match_models(tmp_path):
    url = f"sqlite:///{tmp_path / 'schema.db'}"
    migrate(url)
    engine = create_engine(url)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    assert diff == []


def test_migrating_twice_is_a_no_op(tmp_path):
    url = f"sqlite:///{tmp_path / 'again.db'}"
    migrate(url)
    migrate(url)
