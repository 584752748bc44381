"""execution failure: executions.failure, a FAILED execution's type, message and
traceback as data (flux.protocol.failures.Failure; issue 38)

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("executions", sa.Column("failure", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("executions", recreate="never") as batch:  # a plain DROP COLUMN, SQLite too
        batch.drop_column("failure")
