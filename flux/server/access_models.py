"""The tables of who may call and what was called (docs/security.md#roles): API tokens
and the audit log. Beside ``models.py`` (same ``Base``, same metadata) to keep that
file small; whatever compares the schema imports both (migrations/env.py,
tests/server/test_migrations.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from flux.server.models import Base


class ApiTokenModel(Base):
    """A client token: only the SHA-256 of its secret is stored. A revoked token keeps
    its row (and its name), so the audit log's rows still say whose it was."""

    __tablename__ = "api_tokens"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    #: The namespaces it may act in; None: all of them.
    namespaces: Mapped[Any | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class AuditLogModel(Base):
    """One mutating client call, allowed or refused (``flux.server.audit``). Only
    inserted, and deleted only by the server's own retention: no route changes it."""

    __tablename__ = "audit_log"
    #: Newest first, ties by id (the keyset), for each filter the list serves.
    __table_args__ = (
        Index("ix_audit_log_time", "time"),
        Index("ix_audit_log_token", "token", "id"),
        Index("ix_audit_log_namespace", "namespace", "id"),
        Index("ix_audit_log_action", "action", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float)
    #: The token's name (never its secret); None: no token, or one the server does not know.
    token: Mapped[str | None] = mapped_column(String(128), nullable=True)
    role: Mapped[str | None] = mapped_column(String(16), nullable=True)
    #: None for calls about no namespace: the fleet, tokens.
    namespace: Mapped[str | None] = mapped_column(String(128), nullable=True)
    action: Mapped[str] = mapped_column(String(32))
    method: Mapped[str] = mapped_column(String(8))
    #: The path called (no query string).
    target: Mapped[str] = mapped_column(Text)
    #: The answer's status code (401, 403 and 404 included).
    status: Mapped[int] = mapped_column(Integer)
    client: Mapped[str | None] = mapped_column(String(64), nullable=True)
