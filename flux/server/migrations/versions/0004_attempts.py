"""attempts: executions.max_attempts, crashes, ready_at, version_pinned; workflows.max_attempts;
workers.previous_token_hash (a worker killed mid-registration restarts as itself)

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("executions") as batch_op:
        batch_op.add_column(sa.Column("max_attempts", sa.Integer(), nullable=False, server_default="3"))
        batch_op.add_column(sa.Column("crashes", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("ready_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("version_pinned", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("workflows") as batch_op:
        batch_op.add_column(sa.Column("max_attempts", sa.Integer(), nullable=True))
    with op.batch_alter_table("workers") as batch_op:
        batch_op.add_column(sa.Column("previous_token_hash", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch_op:
        batch_op.drop_column("previous_token_hash")
    with op.batch_alter_table("workflows") as batch_op:
        batch_op.drop_column("max_attempts")
    with op.batch_alter_table("executions") as batch_op:
        for column in ("version_pinned", "ready_at", "crashes", "max_attempts"):
            batch_op.drop_column(column)
