"""package sets: a worker's packages are stored once per distinct set, by digest
(package_sets, package_set_entries), not once per worker (worker_packages): a fleet
of a thousand workers from one image registers one set (docs/fleet.md)

Revision ID: 0013
Revises: 0012
"""

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _digest(pairs: list[tuple[str, str]]) -> str:
    """``flux.server.fleet.packages_digest``, frozen here as this revision wrote it."""
    return hashlib.sha256("\n".join(sorted(f"{name}=={version}" for name, version in pairs)).encode()).hexdigest()


def upgrade() -> None:
    op.create_table(
        "package_sets",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("digest"),
    )
    op.create_table(
        "package_set_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(["digest"], ["package_sets.digest"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_package_set_entries_digest", "package_set_entries", ["digest"])
    connection = op.get_bind()
    packages: dict[int, list[tuple[str, str]]] = {}
    for worker_id, name, version in connection.execute(sa.text("SELECT worker_id, name, version FROM worker_packages")):
        packages.setdefault(worker_id, []).append((name, version))
    stored: set[str] = set()
    for (worker_id,) in connection.execute(sa.text("SELECT id FROM workers")).all():
        pairs = packages.get(worker_id, [])
        digest = _digest(pairs)
        connection.execute(
            sa.text("UPDATE workers SET packages_digest = :d WHERE id = :i"), {"d": digest, "i": worker_id}
        )
        if digest not in stored:
            stored.add(digest)
            connection.execute(sa.text("INSERT INTO package_sets (digest) VALUES (:d)"), {"d": digest})
            if pairs:
                connection.execute(
                    sa.text("INSERT INTO package_set_entries (digest, name, version) VALUES (:d, :n, :v)"),
                    [{"d": digest, "n": n, "v": v} for n, v in pairs],
                )
    op.drop_index("ix_worker_packages_worker_id", table_name="worker_packages")
    op.drop_table("worker_packages")


def downgrade() -> None:
    op.create_table(
        "worker_packages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(["worker_id"], ["workers.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_worker_packages_worker_id", "worker_packages", ["worker_id"])
    op.execute(
        "INSERT INTO worker_packages (worker_id, name, version) SELECT w.id, e.name, e.version "
        "FROM workers w JOIN package_set_entries e ON e.digest = w.packages_digest"
    )
    op.drop_index("ix_package_set_entries_digest", table_name="package_set_entries")
    op.drop_table("package_set_entries")
    op.drop_table("package_sets")
