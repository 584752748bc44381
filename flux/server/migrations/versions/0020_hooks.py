"""hooks: the hooks table (webhook subscriptions, their secret encrypted), the
hook_deliveries outbox and each delivery's hook_attempts (issue 39, docs/hooks.md)

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hooks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(length=128), server_default="default", nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("workflow", sa.String(length=128), nullable=True),
        sa.Column("secret_encrypted", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("namespace", "name", name="uq_hook_namespace_name"),
    )
    op.create_table(
        "hook_deliveries",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("hook_id", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=160), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index("ix_hook_deliveries_due", "hook_deliveries", ["state", "next_attempt_at"])
    op.create_index("ix_hook_deliveries_order", "hook_deliveries", ["hook_id", "subject", "seq"])
    op.create_table(
        "hook_attempts",
        sa.Column("delivery_seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["delivery_seq"], ["hook_deliveries.seq"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("delivery_seq", "number"),
    )


def downgrade() -> None:
    op.drop_table("hook_attempts")
    for index in ("ix_hook_deliveries_order", "ix_hook_deliveries_due"):
        op.drop_index(index, table_name="hook_deliveries")
    op.drop_table("hook_deliveries")
    op.drop_table("hooks")
