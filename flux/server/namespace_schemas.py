"""Pydantic models of the namespace API (``/namespaces``, docs/namespaces.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_core import PydanticCustomError

from flux.domain.names import NAME_PATTERN
from flux.domain.namespaces import NamespaceState, check_namespace
from flux.domain.quotas import Quota, QuotaChange
from flux.domain.resource_request import InvalidResourceRequest
from flux.server.schemas import Amount, Strict


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
    quota: dict[str, Amount] | None = Field(
        default=None,
        description="The most it may hold at once: cpu, memory and disk (bytes), gpu, custom resources (by their "
        "own name, as held counts them), executions",
    )


def _checked_quota(read):  # noqa: ANN001, ANN202
    """The domain's reason (``did you mean gpu?``), as a field error without pydantic's prefix."""
    try:
        return read()
    except InvalidResourceRequest as exc:
        raise PydanticCustomError("invalid_quota", str(exc)) from None


class NamespaceUpdate(Strict):
    """``PATCH /namespaces/NAME``: what is given changes. ``quota`` is a merge patch (RFC
    7396, as ``kubectl patch --type merge``): the keys given change, a null removes its
    key, the others are kept; ``"quota": null`` removes the whole quota."""

    weight: float | None = Field(default=None, gt=0, le=1e6, description="Fair-share weight (default 1)")
    quota: dict[str, float | str | None] | None = Field(
        default=None,
        description="Changes the quota's keys given, keeps the others; null removes a key: "
        "{'gpu': 2, 'resources.fpga': null}. Keys: cpu, memory, disk, gpu, executions, resources.NAME",
    )

    @field_validator("quota")
    @classmethod
    def _valid_quota(cls, value: dict | None) -> dict | None:
        if value is not None:
            _checked_quota(lambda: QuotaChange.from_mapping(value))
        return value

    def quota_change(self) -> QuotaChange | None:
        """The change to the quota; None when ``quota`` was not given or is null."""
        return None if self.quota is None else QuotaChange.from_mapping(self.quota)


class QuotaReplacement(Strict):
    """``PUT /namespaces/NAME/quota``: the whole quota, replacing the one it had ({} removes it)."""

    quota: dict[str, float | str] = Field(
        description="{'cpu': 16, 'memory': '64Gi', 'gpu': 4, 'executions': 100, 'resources.fpga': 2}"
    )

    @field_validator("quota")
    @classmethod
    def _valid_quota(cls, value: dict) -> dict:
        _checked_quota(lambda: Quota.from_mapping(value))
        return value

    def to_quota(self) -> Quota:
        return Quota.from_mapping(self.quota)


class NamespaceDetail(NamespaceInfo):
    """``GET /namespaces/NAME``: what it holds."""

    workflows: int = Field(description="Workflows (by name; each may have several versions)")
    executions: dict[str, int] = Field(description="Executions by state")
    unfinished: int = Field(description="Executions that have not finished (what a delete without force refuses for)")
    schedules: int
    secrets: int
    held: dict[str, Amount] = Field(
        default={}, description="What its executions that hold a worker hold: quantities and executions"
    )
    waiting: dict[str, int] = Field(default={}, description="Executions queued (SCHEDULED), by priority")
    usage: dict[str, float] = Field(
        default={},
        description="Its decayed past usage for fair share: resource-seconds by dimension over the fleet's size",
    )
    usage_share: float = Field(
        default=0.0,
        description="Its decayed dominant usage as a share of the fleet: what fair share adds to what it holds now",
    )
    fair_share_half_life: float = Field(default=0.0, description="Seconds in which past usage halves (0: none kept)")
    preemption_lost_seconds: float = Field(
        default=0.0, description="Seconds of work its preempted attempts threw away (since each one's last checkpoint)"
    )


class NamespaceDeletion(BaseModel):
    name: str
    state: Literal["DELETED", "TERMINATING"] = Field(
        description="DELETED: gone with everything in it; "
        "TERMINATING: it goes once the executions it cancelled have ended"
    )
    cancelled: int = Field(description="Executions this delete cancelled (force=true)")
    unfinished: int = Field(description="Executions still ending (held by workers that were asked to stop)")
