"""The stores of the attempt services (docs/tasks.md): the task cache and secrets, per
namespace. Beside ``models.py`` (same ``Base``, same metadata) to keep that file small;
whatever compares the schema imports it (migrations/env.py, tests/server/test_migrations.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Float, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from flux.server.models import Base, namespace_column


class TaskCacheModel(Base):
    """A cached task result (``cache=True``, docs/tasks.md#cache), by the key the child
    computed (sha256 of the task's name, version and JSON arguments)."""

    __tablename__ = "task_cache"

    #: The namespace of the executions that share it.
    namespace: Mapped[str] = namespace_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_name: Mapped[str] = mapped_column(String(128), index=True)
    value: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    #: None: kept until ``flux cache clear``.
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The execution whose task produced it (provenance; not a foreign key: it outlives retention).
    execution_id: Mapped[str | None] = mapped_column(String(32), nullable=True)


class SecretModel(Base):
    """A secret, its value encrypted with the server's key (Fernet; ``flux.server.secrets``)."""

    __tablename__ = "secrets"

    namespace: Mapped[str] = namespace_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    encrypted: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
