"""schedules: the schedules table; executions.schedule and scheduled_for, unique
together (one execution per due time, docs/schedules.md), and the schedule filter's index

A unique *index*, not a constraint: adding a constraint makes Alembic rebuild the
``executions`` table on SQLite, which would drop the triggers of 0009.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("workflow_name", sa.String(length=128), nullable=False),
        sa.Column("workflow_version", sa.Integer(), nullable=True),
        sa.Column("cron", sa.String(length=255), nullable=True),
        sa.Column("every", sa.Float(), nullable=True),
        sa.Column("at", sa.Float(), nullable=True),
        sa.Column("anchor", sa.Float(), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("input", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("overlap", sa.String(length=16), nullable=False),
        sa.Column("catch_up", sa.String(length=16), nullable=False),
        sa.Column("catch_up_limit", sa.Integer(), nullable=False),
        sa.Column("jitter", sa.Float(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("next_due", sa.Float(), nullable=True),
        sa.Column("next_fire_at", sa.Float(), nullable=True),
        sa.Column("queued_due", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_index("ix_schedules_paused_next_fire", "schedules", ["paused", "next_fire_at"])
    with op.batch_alter_table("executions", recreate="never") as batch_op:
        batch_op.add_column(sa.Column("schedule", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("scheduled_for", sa.Float(), nullable=True))
    op.create_index("uq_execution_schedule_due", "executions", ["schedule", "scheduled_for"], unique=True)
    op.create_index("ix_executions_schedule_order", "executions", ["schedule", "scheduled_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_executions_schedule_order", table_name="executions")
    op.drop_index("uq_execution_schedule_due", table_name="executions")
    with op.batch_alter_table("executions") as batch_op:
        batch_op.drop_column("scheduled_for")
        batch_op.drop_column("schedule")
    op.drop_index("ix_schedules_paused_next_fire", table_name="schedules")
    op.drop_table("schedules")
