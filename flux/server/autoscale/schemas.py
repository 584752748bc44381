"""Pydantic models of the pools API (``/pools``, docs/autoscaling.md). A pool's
resources are parsed by the request's own parser (``ResourceRequest``), so a template
says ``cpu=8,memory=32Gi,gpu=1,accel=2`` exactly as a workflow asks for it; each
provider's options are its own model, checked at creation (422 before anything is stored)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from flux.domain.durations import InvalidDuration, parse_duration
from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
from flux.server.schemas import Strict

#: A pool's name: lowercase, digits and '-' (it is part of its workers' names and, on
#: Kubernetes, of their Pods' names: DNS-1123), at most 40 characters.
POOL_NAME = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"
Provider = Literal["local", "kubernetes", "command"]
_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(==[A-Za-z0-9.+!_-]+)?$")


class LocalOptions(Strict):
    """``flux start worker`` processes on the server's host."""

    server_url: str | None = Field(
        default=None, max_length=512, description="The URL its workers reach the server by [this server's]"
    )
    worker_args: list[str] = Field(
        default_factory=list, max_length=64, description="More `flux start worker` arguments, e.g. --runner inprocess"
    )


class KubernetesOptions(Strict):
    """A Deployment's replicas (the scale subresource), or one Pod per worker from a template."""

    namespace: str = Field(default="default", max_length=63)
    deployment: str | None = Field(default=None, max_length=253, description="Scale this Deployment's replicas")
    pod_template: dict[str, Any] | None = Field(
        default=None, description="Or create one Pod per worker from this manifest"
    )
    kubeconfig: str | None = Field(
        default=None, max_length=1024, description="A kubeconfig file [in-cluster, else ~/.kube/config]"
    )
    context: str | None = Field(default=None, max_length=253)

    @model_validator(mode="after")
    def _one_mode(self) -> "KubernetesOptions":
        if (self.deployment is None) == (self.pod_template is None):
            raise ValueError("give exactly one of deployment or pod_template")
        return self


class CommandOptions(Strict):
    """A user's executable, run with the desired count."""

    command: list[str] = Field(min_length=1, max_length=64, description="argv; the desired count is appended")
    timeout: float = Field(default=60.0, gt=0, le=3600)


OPTIONS: dict[str, type[Strict]] = {"local": LocalOptions, "kubernetes": KubernetesOptions, "command": CommandOptions}


class PoolSpec(Strict):
    """What a pool is: the template of its workers, its bounds and its provider."""

    labels: dict[str, str] = Field(
        default_factory=dict, description="Labels its workers advertise (and flux.pool=NAME)"
    )
    resources: dict[str, int | float | str] = Field(
        default_factory=dict, description="cpu, memory, disk, gpu and custom resources each worker has"
    )
    packages: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Distributions its workers have installed: name or name==version",
    )
    slots: int = Field(default=4, ge=1, le=1024, description="Executions one worker runs at once")
    min: int = Field(default=0, ge=0, le=10_000)
    max: int = Field(default=10, ge=0, le=10_000)
    idle_timeout: float | str = Field(
        default=300.0, description="Seconds or a duration ('5m') a worker idles above min before it is drained"
    )
    provider: Provider
    options: dict[str, Any] = Field(
        default_factory=dict, description="The provider's options (LocalOptions, KubernetesOptions, CommandOptions)"
    )

    @field_validator("resources")
    @classmethod
    def _resources(cls, value: dict[str, int | float | str]) -> dict[str, int | float | str]:
        template_request(value)
        return value

    @field_validator("packages")
    @classmethod
    def _packages(cls, value: list[str]) -> list[str]:
        bad = [p for p in value if not _PACKAGE.fullmatch(p)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a package (name or name==version)")
        return value

    @field_validator("idle_timeout")
    @classmethod
    def _idle(cls, value: float | str) -> float:
        try:
            seconds = parse_duration(value, "idle_timeout")
        except InvalidDuration as exc:
            raise ValueError(str(exc)) from None
        if seconds < 0:
            raise ValueError("idle_timeout: must not be negative")
        return seconds

    @model_validator(mode="after")
    def _bounds_and_options(self) -> "PoolSpec":
        if self.min > self.max:
            raise ValueError(f"min {self.min} is more than max {self.max}")
        try:
            self.options = OPTIONS[self.provider].model_validate(self.options).model_dump(exclude_none=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(
                f"options for provider {self.provider}: {where + ': ' if where else ''}{first['msg']}"
            ) from None
        return self


class PoolCreate(PoolSpec):
    name: str = Field(pattern=POOL_NAME, description="Lowercase letters, digits and '-', at most 40")


def template_request(resources: dict[str, int | float | str]) -> ResourceRequest:
    """A template's resources as a request's: cpu, memory, disk, gpu by name, the rest custom."""
    known = {k: v for k, v in resources.items() if k in ("cpu", "memory", "disk", "gpu")}
    custom = {k: v for k, v in resources.items() if k not in known}
    try:
        return ResourceRequest(**known, resources=custom or None)
    except InvalidResourceRequest as exc:
        raise ValueError(str(exc)) from None


class PoolWorkerInfo(BaseModel):
    name: str
    state: str = Field(description="starting, running or stopping")
    requested_at: float
    idle_since: float | None


class PoolInfo(PoolSpec):
    model_config = {"strict": False, "extra": "ignore"}

    name: str
    created_at: float
    desired: int = Field(description="Workers the last pass decided the pool needs")
    starting: int
    running: int
    idle: int = Field(description="Running workers that hold nothing")
    stopping: int
    decision: str | None = Field(description="The last pass's decision, and why")
    decided_at: float | None
    provider_error: str | None = Field(description="The provider's last failure; null once it succeeds again")
    failures: int = Field(description="Provider failures in a row")
    retry_at: float | None = Field(description="After a failure, the provider is not called before this")
    deleting: bool
    workers: list[PoolWorkerInfo]


class PoolDemand(BaseModel):
    """Read by KEDA's metrics-api scaler: desired workers per pool."""

    pools: dict[str, int] = Field(description="pool -> desired workers (valueLocation: pools.NAME)")
