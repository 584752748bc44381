"""worker_resources.capacity and .available: the probed quantities as data, a JSON
mapping of dimension name to quantity each, in place of a column per dimension
(cpu_total, cpu_available, memory_total, memory_available, disk_total, disk_free):
a new probed dimension needs no column (issue 32, item 2)

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

#: The columns this revision folds into the mappings, by dimension: (total, available).
_COLUMNS = {
    "cpu": ("cpu_total", "cpu_available", sa.Float()),
    "memory": ("memory_total", "memory_available", sa.BigInteger()),
    "disk": ("disk_total", "disk_free", sa.BigInteger()),
}
_TABLE = sa.table(
    "worker_resources",
    sa.column("worker_id", sa.Integer()),
    sa.column("capacity", sa.JSON()),
    sa.column("available", sa.JSON()),
    *(sa.column(name, kind) for total, available, kind in _COLUMNS.values() for name in (total, available)),
)


def upgrade() -> None:
    with op.batch_alter_table("worker_resources") as batch_op:
        batch_op.add_column(sa.Column("capacity", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("available", sa.JSON(), nullable=True))
    connection = op.get_bind()
    old = [c for total, available, _ in _COLUMNS.values() for c in (_TABLE.c[total], _TABLE.c[available])]
    for row in connection.execute(sa.select(_TABLE.c.worker_id, *old)).mappings().all():
        connection.execute(
            _TABLE.update()
            .where(_TABLE.c.worker_id == row["worker_id"])
            .values(
                capacity={dimension: row[total] for dimension, (total, _, _) in _COLUMNS.items()},
                available={dimension: row[available] for dimension, (_, available, _) in _COLUMNS.items()},
            )
        )
    with op.batch_alter_table("worker_resources") as batch_op:
        batch_op.alter_column("capacity", existing_type=sa.JSON(), nullable=False)
        batch_op.alter_column("available", existing_type=sa.JSON(), nullable=False)
        for total, available, _ in _COLUMNS.values():
            batch_op.drop_column(total)
            batch_op.drop_column(available)


def downgrade() -> None:
    with op.batch_alter_table("worker_resources") as batch_op:
        for total, available, kind in _COLUMNS.values():
            batch_op.add_column(sa.Column(total, kind, nullable=True))
            batch_op.add_column(sa.Column(available, kind, nullable=True))
    connection = op.get_bind()
    for row in (
        connection.execute(sa.select(_TABLE.c.worker_id, _TABLE.c.capacity, _TABLE.c.available)).mappings().all()
    ):
        values = {}
        for dimension, (total, available, kind) in _COLUMNS.items():
            cast = float if isinstance(kind, sa.Float) else int
            values[total] = cast((row["capacity"] or {}).get(dimension, 0))
            values[available] = cast((row["available"] or {}).get(dimension, 0))
        connection.execute(_TABLE.update().where(_TABLE.c.worker_id == row["worker_id"]).values(**values))
    with op.batch_alter_table("worker_resources") as batch_op:
        for total, available, kind in _COLUMNS.values():
            batch_op.alter_column(total, existing_type=kind, nullable=False)
            batch_op.alter_column(available, existing_type=kind, nullable=False)
        batch_op.drop_column("available")
        batch_op.drop_column("capacity")
