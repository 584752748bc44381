"""The tables of worker pools (docs/autoscaling.md): each pool's template, bounds,
provider and last decision, and every worker a pool asked for. Beside ``models.py``
(same ``Base``) to keep that file small; whatever compares the schema imports it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from flux.server.models import Base


class PoolModel(Base):
    """A pool: the template its workers follow, its bounds and provider, and the state
    the scaling pass leaves (desired, the last decision and why, the provider's failure)."""

    __tablename__ = "pools"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    #: cpu, memory, disk and custom resources, by dimension.
    resources: Mapped[dict[str, float]] = mapped_column(JSON)
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    #: Installed distributions: name -> version.
    packages: Mapped[dict[str, str]] = mapped_column(JSON)
    slots: Mapped[int] = mapped_column(Integer)
    minimum: Mapped[int] = mapped_column(Integer)
    maximum: Mapped[int] = mapped_column(Integer)
    idle_timeout: Mapped[float] = mapped_column(Float)
    provider: Mapped[str] = mapped_column(String(32))
    #: The provider's own settings (no secrets: credentials come from the environment).
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    desired: Mapped[int] = mapped_column(Integer, default=0)
    decision: Mapped[str | None] = mapped_column(Text, nullable=True)
    decided_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The provider's last failure, and how many in a row (reset by a success).
    provider_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    #: After a failure, the provider is not called again before this time (backoff).
    retry_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Deleted: its workers are drained and stopped, then the row goes.
    deleting: Mapped[bool] = mapped_column(Boolean, default=False)


class PoolWorkerModel(Base):
    """A worker a pool asked its provider for: starting until it registers, running,
    stopping once drained for scale-down. ``idle_since``: when it last held nothing."""

    __tablename__ = "pool_workers"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    pool: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[str] = mapped_column(String(16))
    requested_at: Mapped[float] = mapped_column(Float)
    idle_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: When it was drained for scale-down (it is stopped no sooner than ``loop.DRAIN_GRACE`` later).
    stopping_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: What the provider knows it by (the local provider: its process id), for any replica to stop it.
    handle: Mapped[str | None] = mapped_column(String(255), nullable=True)
