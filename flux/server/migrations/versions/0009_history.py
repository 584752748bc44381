"""history: an index for each list order and filter, finished-execution counts kept
by triggers (docs/history.md)

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

#: Orders and filters of ``GET /executions`` (newest first, ties by id).
INDEXES = {
    "ix_executions_order": ["scheduled_at", "id"],
    "ix_executions_state_order": ["state", "scheduled_at", "id"],
    "ix_executions_workflow_order": ["workflow_name", "scheduled_at", "id"],
    "ix_executions_worker_order": ["worker_name", "scheduled_at", "id"],
    "ix_executions_finished": ["finished_at"],
}

#: A finished execution is one with ``finished_at`` set, whatever its terminal state:
#: a state added later needs no new trigger.
SQLITE_TRIGGERS = [
    """CREATE TRIGGER trg_execution_counts_insert AFTER INSERT ON executions
       WHEN NEW.finished_at IS NOT NULL BEGIN
         INSERT INTO execution_counts (state, count) VALUES (NEW.state, 1)
           ON CONFLICT (state) DO UPDATE SET count = count + 1;
       END""",
    """CREATE TRIGGER trg_execution_counts_update AFTER UPDATE OF state, finished_at ON executions
       WHEN OLD.state IS NOT NEW.state OR OLD.finished_at IS NOT NEW.finished_at BEGIN
         UPDATE execution_counts SET count = count - 1 WHERE state = OLD.state AND OLD.finished_at IS NOT NULL;
         INSERT INTO execution_counts (state, count) SELECT NEW.state, 1 WHERE NEW.finished_at IS NOT NULL
           ON CONFLICT (state) DO UPDATE SET count = count + 1;
       END""",
    """CREATE TRIGGER trg_execution_counts_delete AFTER DELETE ON executions
       WHEN OLD.finished_at IS NOT NULL BEGIN
         UPDATE execution_counts SET count = count - 1 WHERE state = OLD.state;
       END""",
]

POSTGRES_FUNCTION = """
CREATE FUNCTION flux_execution_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.state IS NOT DISTINCT FROM NEW.state
     AND OLD.finished_at IS NOT DISTINCT FROM NEW.finished_at THEN
    RETURN NULL;
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.finished_at IS NOT NULL THEN
    UPDATE execution_counts SET count = count - 1 WHERE state = OLD.state;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.finished_at IS NOT NULL THEN
    INSERT INTO execution_counts (state, count) VALUES (NEW.state, 1)
      ON CONFLICT (state) DO UPDATE SET count = execution_counts.count + 1;
  END IF;
  RETURN NULL;
END $$
"""
POSTGRES_TRIGGER = """
CREATE TRIGGER trg_execution_counts AFTER INSERT OR DELETE OR UPDATE OF state, finished_at
ON executions FOR EACH ROW EXECUTE FUNCTION flux_execution_counts()
"""


def upgrade() -> None:
    op.create_table(
        "execution_counts",
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("state"),
    )
    op.execute(
        "INSERT INTO execution_counts (state, count) "
        "SELECT state, count(*) FROM executions WHERE finished_at IS NOT NULL GROUP BY state"
    )
    with op.batch_alter_table("executions") as batch_op:
        batch_op.drop_index("ix_executions_state_scheduled")
        for name, columns in INDEXES.items():
            batch_op.create_index(name, columns, unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_FUNCTION)
        op.execute(POSTGRES_TRIGGER)
    else:
        for statement in SQLITE_TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER trg_execution_counts ON executions")
        op.execute("DROP FUNCTION flux_execution_counts()")
    else:
        for name in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER trg_execution_counts_{name}")
    with op.batch_alter_table("executions") as batch_op:
        for name in INDEXES:
            batch_op.drop_index(name)
        batch_op.create_index("ix_executions_state_scheduled", ["state", "scheduled_at"], unique=False)
    op.drop_table("execution_counts")
