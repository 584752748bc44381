"""namespaces: the namespaces table (``default`` always there), and a namespace column
on workflows, executions, schedules, secrets and task_cache; names unique within a
namespace (docs/namespaces.md). Everything stored before belongs to ``default``.

``executions`` gains its column with a plain ALTER TABLE (SQLite does not recreate it,
so the triggers of 0009 stay) and its list indexes lead with the namespace. The other
four tables change a unique constraint or their primary key: SQLite recreates them
(batch mode), PostgreSQL alters them in place. The unnamed unique constraint on
``schedules.name`` is ``schedules_name_key`` on PostgreSQL and is found by a naming
convention on SQLite.

Revision ID: 0016
Revises: 0015
"""

import time

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

DEFAULT = "default"
#: Index -> (columns before, columns after).
INDEXES = {
    "ix_executions_order": (["scheduled_at", "id"], ["namespace", "scheduled_at", "id"]),
    "ix_executions_workflow_order": (
        ["workflow_name", "scheduled_at", "id"],
        ["namespace", "workflow_name", "scheduled_at", "id"],
    ),
    "ix_executions_worker_order": (
        ["worker_name", "scheduled_at", "id"],
        ["namespace", "worker_name", "scheduled_at", "id"],
    ),
    "ix_executions_schedule_order": (
        ["schedule", "scheduled_at", "id"],
        ["namespace", "schedule", "scheduled_at", "id"],
    ),
}
UNIQUE_DUE = "uq_execution_schedule_due"
STATE_ORDER = "ix_executions_namespace_state_order"
#: SQLite reflects the schedules' unique constraint without a name: this gives it one.
CONVENTION = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def _column() -> sa.Column:
    return sa.Column("namespace", sa.String(length=128), server_default=DEFAULT, nullable=False)


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    namespaces = op.create_table(
        "namespaces",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.bulk_insert(namespaces, [{"name": DEFAULT, "state": "ACTIVE", "created_at": time.time()}])
    _executions_up()
    with op.batch_alter_table("workflows") as batch_op:
        batch_op.add_column(_column())
        batch_op.drop_constraint("uq_workflow_name_version", type_="unique")
        batch_op.create_unique_constraint("uq_workflow_namespace_name_version", ["namespace", "name", "version"])
    with op.batch_alter_table("schedules", naming_convention=CONVENTION) as batch_op:
        batch_op.add_column(_column())
        batch_op.drop_constraint("uq_schedules_name" if _sqlite() else "schedules_name_key", type_="unique")
        batch_op.create_unique_constraint("uq_schedule_namespace_name", ["namespace", "name"])
    _primary_key("secrets", ["namespace", "name"], add=True)
    _primary_key("task_cache", ["namespace", "key"], add=True)


def _executions_up() -> None:
    op.add_column("executions", _column())
    for name, (_, after) in INDEXES.items():
        op.drop_index(name, table_name="executions")
        op.create_index(name, "executions", after)
    op.create_index(STATE_ORDER, "executions", ["namespace", "state", "scheduled_at", "id"])
    op.drop_index(UNIQUE_DUE, table_name="executions")
    op.create_index(UNIQUE_DUE, "executions", ["namespace", "schedule", "scheduled_for"], unique=True)


def _before(table: str) -> sa.Table:
    """``table`` as 0011 made it, less its primary key: what SQLite's copy starts from
    (a reflected copy would keep the old key, and ``create_primary_key`` sets the new one)."""
    columns = {
        "secrets": [
            sa.Column("name", sa.String(length=128), nullable=False),
            sa.Column("encrypted", sa.Text(), nullable=False),
            sa.Column("created_at", sa.Float(), nullable=False),
            sa.Column("updated_at", sa.Float(), nullable=False),
        ],
        "task_cache": [
            sa.Column("key", sa.String(length=64), nullable=False),
            sa.Column("task_name", sa.String(length=128), nullable=False),
            sa.Column("value", sa.JSON(none_as_null=True), nullable=True),
            sa.Column("created_at", sa.Float(), nullable=False),
            sa.Column("expires_at", sa.Float(), nullable=True),
            sa.Column("execution_id", sa.String(length=32), nullable=True),
            sa.Index("ix_task_cache_task_name", "task_name"),
        ],
    }
    return sa.Table(table, sa.MetaData(), *columns[table])


def _primary_key(table: str, columns: list[str], add: bool) -> None:
    """Replace ``table``'s primary key with ``columns`` (adding or dropping ``namespace``)."""
    copy_from = _before(table) if add and _sqlite() else None
    with op.batch_alter_table(table, copy_from=copy_from) as batch_op:
        if add:
            batch_op.add_column(_column())
        if not _sqlite():
            batch_op.drop_constraint(f"{table}_pkey", type_="primary")
        batch_op.create_primary_key(f"{table}_pkey", columns)
        if not add:
            batch_op.drop_column("namespace")


def downgrade() -> None:
    """Only a database whose names are unique across namespaces goes back: the rest
    fails on the restored constraints, and nothing is lost."""
    _primary_key("task_cache", ["key"], add=False)
    _primary_key("secrets", ["name"], add=False)
    with op.batch_alter_table("schedules") as batch_op:
        batch_op.drop_constraint("uq_schedule_namespace_name", type_="unique")
        batch_op.create_unique_constraint("uq_schedules_name" if _sqlite() else "schedules_name_key", ["name"])
        batch_op.drop_column("namespace")
    with op.batch_alter_table("workflows") as batch_op:
        batch_op.drop_constraint("uq_workflow_namespace_name_version", type_="unique")
        batch_op.create_unique_constraint("uq_workflow_name_version", ["name", "version"])
        batch_op.drop_column("namespace")
    op.drop_index(UNIQUE_DUE, table_name="executions")
    op.create_index(UNIQUE_DUE, "executions", ["schedule", "scheduled_for"], unique=True)
    op.drop_index(STATE_ORDER, table_name="executions")
    for name, (before, _) in INDEXES.items():
        op.drop_index(name, table_name="executions")
        op.create_index(name, "executions", before)
    with op.batch_alter_table("executions", recreate="never") as batch_op:
        batch_op.drop_column("namespace")
    op.drop_table("namespaces")
