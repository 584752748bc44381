"""Pydantic models of the token and audit API (docs/security.md#roles), apart from
``schemas.py`` to keep that file small."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from flux.domain.access import Action, Role
from flux.domain.names import NAME_PATTERN, check_name
from flux.server.schemas import Strict

#: The most namespaces one token may name (a token for more is a token for all).
MAX_TOKEN_NAMESPACES = 100
#: The longest a token may live: 100 years, in seconds.
MAX_EXPIRES_IN = 3_153_600_000


class TokenCreate(Strict):
    name: str = Field(json_schema_extra={"pattern": NAME_PATTERN}, description="Unique, kept after revocation")
    role: Role = Field(strict=False, description="viewer, developer, operator or admin (docs/security.md#roles)")
    namespaces: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TOKEN_NAMESPACES,
        description="The namespaces it may act in; null: all of them",
    )
    expires_in: float | None = Field(
        default=None, gt=0, le=MAX_EXPIRES_IN, description="Seconds it is valid for; null: until revoked"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "token")

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, values: list[str] | None) -> list[str] | None:
        return None if values is None else sorted({check_name(value, "namespace") for value in values})


class TokenInfo(BaseModel):
    """A token as listed: never its secret nor its hash."""

    name: str
    role: Role
    namespaces: list[str] | None = Field(description="null: all namespaces")
    namespace: str | None = Field(
        default="default",
        description="The namespace a client acts in when it names none: the token's only namespace, else 'default' "
        "where it may act there; null for several namespaces without 'default' (it must name one)",
    )
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None


class TokenCreated(TokenInfo):
    token: str = Field(description="The secret: shown here once, never again (only its hash is stored)")


class Whoami(BaseModel):
    """Who the presented credential acts as."""

    name: str = Field(
        description="The token's name: 'api-token' (--api-token), 'anonymous' (an open server), or a created token's"
    )
    role: Role
    namespaces: list[str] | None = Field(description="null: all namespaces")
    namespace: str | None = Field(
        default="default",
        description="The namespace a client acts in when it names none: the token's only namespace, else 'default' "
        "where it may act there; null for several namespaces without 'default' (it must name one)",
    )


class AuditEntry(BaseModel):
    id: int
    time: float
    token: str | None = Field(description="The token's name; null: none, or one the server does not know")
    role: Role | None
    namespace: str | None = Field(description="null: a call about no namespace (the fleet, tokens)")
    action: Action
    method: str
    target: str = Field(description="The path called")
    status: int = Field(description="The answer's status code")
    client: str | None = Field(description="The caller's address as the server saw it")
