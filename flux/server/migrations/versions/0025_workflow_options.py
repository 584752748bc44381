"""workflow options as one document (issue 51; docs/architecture.md, "Workflow options").

``workflows`` gains ``options``: each version's options in their JSON form
(``flux.domain.workflow_options.WorkflowOptions.stored``), beside the columns dispatch
and submission read. Upgrade fills it for every stored version from those columns: the
name, each option set, the contention options merged in. Downgrade drops it; the
columns still hold every option. A plain ALTER TABLE (SQLite keeps its triggers).

Revision ID: 0025
Revises: 0024
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

#: The columns that held a version's options before 0025, in the document's order.
OPTION_COLUMNS = ("requests", "affinity", "routing", "pending_timeout", "max_attempts", "timeout")

WORKFLOWS = sa.table(
    "workflows",
    sa.column("id", sa.Integer()),
    sa.column("name", sa.String()),
    *(sa.column(name, sa.JSON()) for name in ("requests", "affinity", "routing")),
    *(sa.column(name, sa.Float()) for name in ("pending_timeout", "timeout")),
    sa.column("max_attempts", sa.Integer()),
    sa.column("contention", sa.JSON()),
    sa.column("options", sa.JSON(none_as_null=True)),
)
OPTIONS_READ = tuple(WORKFLOWS.c[name] for name in OPTION_COLUMNS)


def document(row: sa.Row) -> dict:
    """A version's options document from its columns (as ``WorkflowOptions.stored`` writes it)."""
    options = {"name": row.name}
    options.update({name: getattr(row, name) for name in OPTION_COLUMNS if getattr(row, name) is not None})
    options.update(row.contention or {})
    return options


def upgrade() -> None:
    op.add_column("workflows", sa.Column("options", sa.JSON(none_as_null=True), nullable=True))
    connection = op.get_bind()
    rows = connection.execute(sa.select(WORKFLOWS.c.id, WORKFLOWS.c.name, *OPTIONS_READ, WORKFLOWS.c.contention)).all()
    if rows:
        connection.execute(
            sa.update(WORKFLOWS)
            .where(WORKFLOWS.c.id == sa.bindparam("row_id"))
            .values(options=sa.bindparam("document")),
            [{"row_id": row.id, "document": document(row)} for row in rows],
        )


def downgrade() -> None:
    with op.batch_alter_table("workflows", recreate="never") as batch:  # a plain DROP COLUMN, SQLite too
        batch.drop_column("options")
