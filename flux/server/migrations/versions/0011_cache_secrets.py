"""cache and secrets: the task_cache table (cached task results, docs/tasks.md#cache)
and the secrets table (Fernet-encrypted values, docs/tasks.md#secrets)

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_cache",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("task_name", sa.String(length=128), nullable=False),
        sa.Column("value", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("execution_id", sa.String(length=32), nullable=True),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_task_cache_task_name", "task_cache", ["task_name"])
    op.create_table(
        "secrets",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("encrypted", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("secrets")
    op.drop_index("ix_task_cache_task_name", table_name="task_cache")
    op.drop_table("task_cache")
