"""gang executions (issue 53; docs/gangs.md).

``executions`` gains, on a gang's own row, ``gang`` (its ``Gang`` JSON form: size,
topology, prefer, per_worker, start_timeout) and, on each of its members' rows,
``gang_id`` (the gang's execution) and ``rank``; ``gang_address`` is where a member's
worker said its peers reach it (``host:port``) at the rendezvous of its current attempt.
Plain ALTER TABLEs (SQLite keeps its triggers) and one index: a gang's members by rank.

Revision ID: 0026
Revises: 0025
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("executions", sa.Column("gang", sa.JSON(none_as_null=True), nullable=True))
    op.add_column("executions", sa.Column("gang_id", sa.String(length=32), nullable=True))
    op.add_column("executions", sa.Column("rank", sa.Integer(), nullable=True))
    op.add_column("executions", sa.Column("gang_address", sa.String(length=300), nullable=True))
    op.create_index("ix_executions_gang", "executions", ["gang_id", "rank"])


def downgrade() -> None:
    op.drop_index("ix_executions_gang", table_name="executions")
    with op.batch_alter_table("executions", recreate="never") as batch:  # plain DROP COLUMNs, SQLite too
        for name in ("gang_address", "rank", "gang_id", "gang"):
            batch.drop_column(name)
