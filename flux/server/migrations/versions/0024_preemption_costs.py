"""preemption costs and fair share that remembers (issue 52; docs/contention.md).

``executions`` gains, with plain ALTER TABLEs (SQLite keeps the triggers of 0009):
``min_runtime`` (its workflow's option, seconds), ``progress_at`` (its last completed
task: the checkpoint a preemption loses work since), ``preempted_at`` (when an attempt
of it last ended preempted: the cooldown) and ``preemption_lost_seconds`` (the work
its preempted attempts threw away). ``namespace_usage`` keeps each namespace's
decayed usage (a vector by dimension, and when it was last decayed) and the work
its preemptions lost; replicas share it.

Revision ID: 0024
Revises: 0023
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

EXECUTION_COLUMNS = (
    sa.Column("min_runtime", sa.Float(), nullable=True),
    sa.Column("progress_at", sa.Float(), nullable=True),
    sa.Column("preempted_at", sa.Float(), nullable=True),
    sa.Column("preemption_lost_seconds", sa.Float(), nullable=False, server_default="0"),
)


def upgrade() -> None:
    for column in EXECUTION_COLUMNS:
        op.add_column("executions", column)
    op.create_table(
        "namespace_usage",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("usage", sa.JSON(), nullable=False),
        sa.Column("decayed_at", sa.Float(), nullable=False),
        sa.Column("lost_seconds", sa.Float(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("namespace"),
    )


def downgrade() -> None:
    op.drop_table("namespace_usage")
    with op.batch_alter_table("executions", recreate="never") as batch:  # plain DROP COLUMNs, SQLite too
        for column in reversed(EXECUTION_COLUMNS):
            batch.drop_column(column.name)
