"""Pydantic models of the namespace API (``/namespaces``, docs/namespaces.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from flux.domain.names import NAME_PATTERN
from flux.domain.namespaces import NamespaceState, check_namespace
from flux.domain.quotas import Quota
from flux.server.schemas import Strict


class NamespaceCreate(Strict):
    name: str = Field(
        json_schema_extra={"pattern": NAME_PATTERN}, description="1-128 of A-Z a-z 0-9 _ - . ; not starting with ."
    )

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_namespace(value)


class NamespaceInfo(BaseModel):
    name: str
    state: NamespaceState = Field(
        description="ACTIVE, or TERMINATING while a forced delete waits for its executions to end"
    )
    created_at: float
    weight: float = Field(
        default=1.0, description="Its share of a contended fleet against other namespaces (docs/contention.md)"
    )
    quota: dict[str, float] | None = Field(
        default=None,
        description="The most it may hold at once: cpu, memory and disk (bytes), gpu, custom resources, executions",
    )


class NamespaceUpdate(Strict):
    """``PATCH /namespaces/NAME``: what is given changes; ``"quota": null`` removes the quota."""

    weight: float | None = Field(default=None, gt=0, le=1e6, description="Fair-share weight (default 1)")
    quota: dict[str, float | str] | None = Field(
        default=None,
        description="Replaces the quota: {'cpu': 16, 'memory': '64Gi', 'gpu': 4, 'executions': 100, 'fpga': 2}",
    )

    @field_validator("quota")
    @classmethod
    def _valid_quota(cls, value: dict | None) -> dict | None:
        return None if value is None else Quota.from_mapping(value).to_json()


class NamespaceDetail(NamespaceInfo):
    """``GET /namespaces/NAME``: what it holds."""

    workflows: int = Field(description="Workflows (by name; each may have several versions)")
    executions: dict[str, int] = Field(description="Executions by state")
    unfinished: int = Field(description="Executions that have not finished (what a delete without force refuses for)")
    schedules: int
    secrets: int
    held: dict[str, float] = Field(
        default={}, description="What its executions that hold a worker hold: quantities and executions"
    )
    waiting: dict[str, int] = Field(default={}, description="Executions queued (SCHEDULED), by priority")


class NamespaceDeletion(BaseModel):
    name: str
    state: Literal["DELETED", "TERMINATING"] = Field(
        description="DELETED: gone with everything in it; TERMINATING: it goes once the executions it cancelled have ended"
    )
    cancelled: int = Field(description="Executions this delete cancelled (force=true)")
    unfinished: int = Field(description="Executions still ending (held by workers that were asked to stop)")
