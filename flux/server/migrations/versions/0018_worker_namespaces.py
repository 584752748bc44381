"""worker namespaces: workers.namespaces, the namespaces a worker is restricted to
(``flux start worker --namespace``); null: it serves every one (issue 33)

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("namespaces", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers", recreate="never") as batch:  # a plain DROP COLUMN, SQLite too
        batch.drop_column("namespaces")
