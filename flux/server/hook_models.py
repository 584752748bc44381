"""The tables of webhooks (docs/hooks.md): the hooks, their outbox of deliveries, and
each delivery's attempts. Beside ``models.py`` (same ``Base``); whatever compares the
schema imports it (migrations/env.py, tests/server/test_migrations.py).

A delivery row is the outbox: it is inserted in the transaction of the change it
tells of, and its ``id`` is the stable delivery id a receiver deduplicates by. ``seq``
orders a hook's deliveries of one ``subject`` (an execution, a worker, a schedule).
No foreign key to ``hooks``: a replica whose list of hooks is a moment old may still
enqueue for a hook just deleted, and that must not fail the state change; the
delivery loop drops such rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from flux.server.models import Base, namespace_column


class HookModel(Base):
    __tablename__ = "hooks"
    __table_args__ = (UniqueConstraint("namespace", "name", name="uq_hook_namespace_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace: Mapped[str] = namespace_column()
    name: Mapped[str] = mapped_column(String(128))
    url: Mapped[str] = mapped_column(Text)
    #: The event types (``flux.domain.hooks.HookEventType`` values) it subscribes to.
    events: Mapped[Any] = mapped_column(JSON)
    #: Only this workflow's executions (None: every workflow of the namespace).
    workflow: Mapped[str | None] = mapped_column(String(128), nullable=True)
    #: The signing secret, Fernet-encrypted with the server's secrets key.
    secret_encrypted: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)


class HookDeliveryModel(Base):
    __tablename__ = "hook_deliveries"
    __table_args__ = (
        Index("ix_hook_deliveries_due", "state", "next_attempt_at"),
        Index("ix_hook_deliveries_order", "hook_id", "subject", "seq"),
    )

    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    #: The stable delivery id (32 hex), the same on every attempt and redelivery.
    id: Mapped[str] = mapped_column(String(32), unique=True)
    hook_id: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(String(160))
    #: The JSON body sent: {id, type, time, namespace, data}.
    body: Mapped[Any] = mapped_column(JSON)
    #: pending (due at ``next_attempt_at``, or leased until it while in flight), delivered, dead.
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    next_attempt_at: Mapped[float] = mapped_column(Float)
    #: Past this it is dead instead of retried (created_at + the server's max age).
    expires_at: Mapped[float] = mapped_column(Float)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class HookAttemptModel(Base):
    """One POST of a delivery: when, its answer (or why none), how long it took."""

    __tablename__ = "hook_attempts"

    delivery_seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"),
        ForeignKey("hook_deliveries.seq", ondelete="CASCADE"),
        primary_key=True,
    )
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[float] = mapped_column(Float)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    latency: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
