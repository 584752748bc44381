"""initial schema

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    _workers_workflows_executions()
    _worker_details_and_events()


def _workers_workflows_executions() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("session_token_hash", sa.String(length=64), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("max_concurrent_executions", sa.Integer(), nullable=False),
        sa.Column("allocation", sa.String(length=16), nullable=False),
        sa.Column("custom_resources", sa.JSON(), nullable=False),
        sa.Column("heartbeat_interval", sa.Float(), nullable=False),
        sa.Column("registered_at", sa.Float(), nullable=False),
        sa.Column("last_heartbeat_at", sa.Float(), nullable=False),
        sa.Column("resources_version", sa.Integer(), nullable=False),
        sa.Column("draining", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
        sa.UniqueConstraint("session_token_hash"),
    )
    op.create_table(
        "workflows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("source_digest", sa.String(length=64), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("requests", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("affinity", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("routing", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("pending_timeout", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", "version", name="uq_workflow_name_version"),
    )
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_workflows_name"), ["name"], unique=False)

    op.create_table(
        "executions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("workflow_id", sa.Integer(), nullable=False),
        sa.Column("workflow_name", sa.String(length=128), nullable=False),
        sa.Column("workflow_version", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("input", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("output", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("requests", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("affinity", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("routing", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("pending_timeout", sa.Float(), nullable=True),
        sa.Column("pending_since", sa.Float(), nullable=True),
        sa.Column("placement_note", sa.Text(), nullable=True),
        sa.Column("unschedulable", sa.Text(), nullable=True),
        sa.Column("worker_name", sa.String(length=128), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("delivered", sa.Boolean(), nullable=False),
        sa.Column("allotment", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("row_version", sa.Integer(), nullable=False),
        sa.Column("scheduled_at", sa.Float(), nullable=False),
        sa.Column("claimed_at", sa.Float(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["workflow_id"],
            ["workflows.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.create_index("ix_executions_state_scheduled", ["state", "scheduled_at"], unique=False)
        batch_op.create_index("ix_executions_worker_state", ["worker_name", "state"], unique=False)


def _worker_details_and_events() -> None:
    op.create_table(
        "worker_packages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("worker_packages", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_worker_packages_worker_id"), ["worker_id"], unique=False)

    op.create_table(
        "worker_resources",
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("cpu_total", sa.Float(), nullable=False),
        sa.Column("cpu_available", sa.Float(), nullable=False),
        sa.Column("memory_total", sa.BigInteger(), nullable=False),
        sa.Column("memory_available", sa.BigInteger(), nullable=False),
        sa.Column("disk_total", sa.BigInteger(), nullable=False),
        sa.Column("disk_free", sa.BigInteger(), nullable=False),
        sa.Column("cpu_percent", sa.Float(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("sampled_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
        ),
        sa.PrimaryKeyConstraint("worker_id"),
    )
    op.create_table(
        "worker_resources_gpus",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("memory_total", sa.BigInteger(), nullable=False),
        sa.Column("memory_available", sa.BigInteger(), nullable=False),
        sa.Column("utilization", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("worker_resources_gpus", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_worker_resources_gpus_worker_id"), ["worker_id"], unique=False)

    op.create_table(
        "worker_runtimes",
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("python_version", sa.String(length=32), nullable=False),
        sa.Column("os_name", sa.String(length=64), nullable=False),
        sa.Column("os_version", sa.String(length=128), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("cpu_arch", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
        ),
        sa.PrimaryKeyConstraint("worker_id"),
    )
    op.create_table(
        "execution_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("execution_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=True),
        sa.Column("task_id", sa.String(length=160), nullable=True),
        sa.Column("value", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("worker_name", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["executions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("execution_id", "seq", name="uq_event_execution_seq"),
    )


def downgrade() -> None:
    op.drop_table("execution_events")
    op.drop_table("worker_runtimes")
    with op.batch_alter_table("worker_resources_gpus", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_worker_resources_gpus_worker_id"))

    op.drop_table("worker_resources_gpus")
    op.drop_table("worker_resources")
    with op.batch_alter_table("worker_packages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_worker_packages_worker_id"))

    op.drop_table("worker_packages")
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.drop_index("ix_executions_worker_state")
        batch_op.drop_index("ix_executions_state_scheduled")

    op.drop_table("executions")
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workflows_name"))

    op.drop_table("workflows")
    op.drop_table("workers")
