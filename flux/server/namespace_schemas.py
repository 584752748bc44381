"""Pydantic models of the namespace API (``/namespaces``, docs/namespaces.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from flux.domain.names import NAME_PATTERN
from flux.domain.namespaces import NamespaceState, check_namespace
from flux.server.schemas import Strict


class NamespaceCreate(Strict):
    name: str = Field(json_schema_extra={"pattern": NAME_PATTERN}, description="1-128 of A-Z a-z 0-9 _ - . ; not starting with .")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_namespace(value)


class NamespaceInfo(BaseModel):
    name: str
    state: NamespaceState = Field(description="ACTIVE, or TERMINATING while a forced delete waits for its executions to end")
    created_at: float


class NamespaceDetail(NamespaceInfo):
    """``GET /namespaces/NAME``: what it holds."""

    workflows: int = Field(description="Workflows (by name; each may have several versions)")
    executions: dict[str, int] = Field(description="Executions by state")
    unfinished: int = Field(description="Executions that have not finished (what a delete without force refuses for)")
    schedules: int
    secrets: int


class NamespaceDeletion(BaseModel):
    name: str
    state: Literal["DELETED", "TERMINATING"] = Field(
        description="DELETED: gone with everything in it; TERMINATING: it goes once the executions it cancelled have ended"
    )
    cancelled: int = Field(description="Executions this delete cancelled (force=true)")
    unfinished: int = Field(description="Executions still ending (held by workers that were asked to stop)")
