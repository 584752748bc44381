"""Alembic environment: migrations run online against the server's database URL."""

from alembic import context
from sqlalchemy import create_engine, pool, text

import flux.server.access_models  # noqa: F401 - its tables are part of Base.metadata
import flux.server.hook_models  # noqa: F401 - and these
import flux.server.pool_models  # noqa: F401 - and the pools' tables
import flux.server.service_models  # noqa: F401 - so are these
from flux.server.locks import AdvisoryLock
from flux.server.models import Base

config = context.config
url = config.get_main_option("sqlalchemy.url")


def run_migrations_online() -> None:
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=url.startswith("sqlite"),  # SQLite cannot ALTER most things in place
        )
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                # replicas starting together: one migrates, the others wait, then find it done
                connection.execute(text(f"SELECT pg_advisory_xact_lock({AdvisoryLock.MIGRATIONS.value})"))
            context.run_migrations()
    engine.dispose()


run_migrations_online()
