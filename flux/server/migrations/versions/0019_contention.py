"""contention: priorities, preemption, concurrency limits, quotas and fair-share
weights (issue 34; docs/contention.md).

``executions`` gains its columns with plain ALTER TABLEs (SQLite does not recreate
it, so the triggers of 0009 stay): the resolved ``priority`` (existing rows 0, the
default class) and its class name, ``preemptible``, the rendered ``concurrency``
keys, and the preemption in progress (``preempted_by``, ``preempt_deadline``); one
index serves the queue in priority order, another each (priority, namespace) group's
oldest (``flux.server.queue``). ``workflows`` and ``schedules`` keep what
their options or a schedule asked for; ``namespaces`` their ``weight`` and ``quota``.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

QUEUE = "ix_executions_queue"
GROUPS = "ix_executions_queue_groups"
EXECUTION_COLUMNS = (
    sa.Column("priority", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("priority_class", sa.String(128), nullable=True),
    sa.Column("preemptible", sa.Boolean(), nullable=False, server_default=sa.true()),
    sa.Column("concurrency", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("preempted_by", sa.String(32), nullable=True),
    sa.Column("preempt_deadline", sa.Float(), nullable=True),
)


def upgrade() -> None:
    for column in EXECUTION_COLUMNS:
        op.add_column("executions", column)
    op.create_index(QUEUE, "executions", ["state", sa.text("priority DESC"), "scheduled_at", "id"])
    op.create_index(GROUPS, "executions", ["state", "priority", "namespace", "scheduled_at", "id"])
    op.add_column("workflows", sa.Column("contention", sa.JSON(none_as_null=True), nullable=True))
    op.add_column("schedules", sa.Column("priority", sa.String(32), nullable=True))
    op.add_column("namespaces", sa.Column("weight", sa.Float(), nullable=False, server_default="1"))
    op.add_column("namespaces", sa.Column("quota", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    for table, columns in (
        ("namespaces", ("quota", "weight")),
        ("schedules", ("priority",)),
        ("workflows", ("contention",)),
    ):
        with op.batch_alter_table(table, recreate="never") as batch:  # plain DROP COLUMNs, SQLite too
            for name in columns:
                batch.drop_column(name)
    op.drop_index(GROUPS, table_name="executions")
    op.drop_index(QUEUE, table_name="executions")
    with op.batch_alter_table("executions", recreate="never") as batch:
        for column in reversed(EXECUTION_COLUMNS):
            batch.drop_column(column.name)
