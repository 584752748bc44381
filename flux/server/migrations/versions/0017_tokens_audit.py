"""tokens and audit: the api_tokens table (roles and namespaces of client tokens, only
their hash stored) and the audit_log table (every mutating client call; issue 33)

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("namespaces", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("token", sa.String(length=128), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=True),
        sa.Column("namespace", sa.String(length=128), nullable=True),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("client", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_log_time", "audit_log", ["time"])
    op.create_index("ix_audit_log_token", "audit_log", ["token", "id"])
    op.create_index("ix_audit_log_namespace", "audit_log", ["namespace", "id"])
    op.create_index("ix_audit_log_action", "audit_log", ["action", "id"])


def downgrade() -> None:
    for index in ("ix_audit_log_action", "ix_audit_log_namespace", "ix_audit_log_token", "ix_audit_log_time"):
        op.drop_index(index, table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_table("api_tokens")
