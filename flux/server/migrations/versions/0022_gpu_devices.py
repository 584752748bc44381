"""gpu devices: worker_resources_gpus gains what a device is and how it fares:
compute_capability, mig (a card split into slices), mig_profile and parent (a MIG
slice and its card), unhealthy (why the worker found it in trouble) (issue 36)

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

COLUMNS = ("compute_capability", "mig", "mig_profile", "parent", "unhealthy")


def upgrade() -> None:
    op.add_column("worker_resources_gpus", sa.Column("compute_capability", sa.String(16), nullable=True))
    op.add_column("worker_resources_gpus", sa.Column("mig", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("worker_resources_gpus", sa.Column("mig_profile", sa.String(64), nullable=True))
    op.add_column("worker_resources_gpus", sa.Column("parent", sa.String(128), nullable=True))
    op.add_column("worker_resources_gpus", sa.Column("unhealthy", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("worker_resources_gpus", recreate="never") as batch:  # plain DROP COLUMNs, SQLite too
        for name in reversed(COLUMNS):
            batch.drop_column(name)
