"""schedules.paused_reason: why the server paused a schedule whose timing lies outside
what the API accepts (one stored by an older version, e.g. every=1e-9; issue 31)

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("schedules", sa.Column("paused_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedules", recreate="never") as batch_op:
        batch_op.drop_column("paused_reason")
