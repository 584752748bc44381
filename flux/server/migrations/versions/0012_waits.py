"""waits: durable sleep, pause, sub-workflows and the workflow timeout
(executions.parent_id, wait, deadline; workflows.timeout; docs/waits.md)

Only nullable columns and indexes are added, with plain ALTER TABLE: SQLite does not
recreate ``executions``, so migration 0009's triggers on it stay in place.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

UNFINISHED = sa.text("finished_at IS NULL")


def upgrade() -> None:
    op.add_column("workflows", sa.Column("timeout", sa.Float(), nullable=True))
    op.add_column("executions", sa.Column("parent_id", sa.String(length=32), nullable=True))
    op.add_column("executions", sa.Column("wait", sa.JSON(none_as_null=True), nullable=True))
    op.add_column("executions", sa.Column("deadline", sa.Float(), nullable=True))
    op.create_index("ix_executions_parent", "executions", ["parent_id"], unique=False)
    op.create_index("ix_executions_state_ready", "executions", ["state", "ready_at"], unique=False)
    op.create_index(
        "ix_executions_deadline",
        "executions",
        ["deadline"],
        unique=False,
        sqlite_where=UNFINISHED,
        postgresql_where=UNFINISHED,
    )


def downgrade() -> None:
    for name in ("ix_executions_deadline", "ix_executions_state_ready", "ix_executions_parent"):
        op.drop_index(name, table_name="executions")
    with op.batch_alter_table("executions", recreate="never") as batch_op:
        for column in ("deadline", "wait", "parent_id"):
            batch_op.drop_column(column)
    with op.batch_alter_table("workflows", recreate="never") as batch_op:
        batch_op.drop_column("timeout")
