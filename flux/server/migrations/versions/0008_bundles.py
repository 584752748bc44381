"""bundles: the bundles table (a workflow project's zip, by sha256; small ones inline),
workflows.bundle_sha256 and workflows.module (docs/bundles.md)

Revision ID: 0008
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bundles",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("sha256"),
    )
    with op.batch_alter_table("workflows") as batch_op:
        batch_op.add_column(sa.Column("bundle_sha256", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("module", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workflows") as batch_op:
        batch_op.drop_column("module")
        batch_op.drop_column("bundle_sha256")
    op.drop_table("bundles")
