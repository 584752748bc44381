"""execution logs: the execution_logs table (what an execution printed or logged, per
attempt); executions.last_log_seq, log_batch (fencing of the worker's log batches)
and log_truncated

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("executions") as batch_op:
        batch_op.add_column(sa.Column("last_log_seq", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("log_batch", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("log_truncated", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        "execution_logs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("execution_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("stream", sa.String(length=8), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=True),
        sa.Column("logger", sa.String(length=128), nullable=True),
        sa.Column("task_id", sa.String(length=160), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["execution_id"], ["executions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("execution_id", "seq", name="uq_log_execution_seq"),
    )


def downgrade() -> None:
    op.drop_table("execution_logs")
    with op.batch_alter_table("executions") as batch_op:
        for column in ("log_truncated", "log_batch", "last_log_seq"):
            batch_op.drop_column(column)
