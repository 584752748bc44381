"""worker pools: pools (template, bounds, provider, last decision) and pool_workers
(every worker a pool asked for) (issue 35)

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pools",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("resources", sa.JSON(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("packages", sa.JSON(), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("minimum", sa.Integer(), nullable=False),
        sa.Column("maximum", sa.Integer(), nullable=False),
        sa.Column("idle_timeout", sa.Float(), nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("desired", sa.Integer(), nullable=False),
        sa.Column("decision", sa.Text(), nullable=True),
        sa.Column("decided_at", sa.Float(), nullable=True),
        sa.Column("provider_error", sa.Text(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("retry_at", sa.Float(), nullable=True),
        sa.Column("deleting", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "pool_workers",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.Column("idle_since", sa.Float(), nullable=True),
        sa.Column("stopping_since", sa.Float(), nullable=True),
        sa.Column("handle", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_index("ix_pool_workers_pool", "pool_workers", ["pool"])


def downgrade() -> None:
    op.drop_index("ix_pool_workers_pool", table_name="pool_workers")
    op.drop_table("pool_workers")
    op.drop_table("pools")
