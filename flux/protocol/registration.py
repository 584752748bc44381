"""A worker's registration: what it has (a resource sample, its packages and
runtime), what it offers (labels, slots, custom resources), and the session the
server answers with."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from flux.domain.namespaces import worker_namespaces
from flux.domain.resource_request import InvalidResourceRequest, parse_custom_resources
from flux.domain.samples import probed_problem
from flux.domain.workers import AllocationMode
from flux.protocol.base import Number, Strict

#: The interval a server gives a worker (its own, or longer in a large fleet: docs/fleet.md#heartbeat-pacing).
PACED = (
    "Seconds until the next heartbeat: the worker's own interval, or longer so that a large fleet stays"
    " within the server's heartbeats a second; omitted by older servers: keep your own"
)


class GPUInfo(Strict):
    index: int = Field(ge=0)
    uuid: str
    name: str
    memory_total: int = Field(ge=0)
    memory_available: int = Field(ge=0)
    utilization: float = 0.0
    compute_capability: str | None = Field(default=None, max_length=16, description="NVML's major.minor, e.g. '9.0'")
    mig: bool = Field(default=False, description="Split into MIG slices: the slices are the devices")
    mig_profile: str | None = Field(default=None, max_length=64, description="A MIG slice's profile, e.g. '1g.10gb'")
    parent: str | None = Field(default=None, max_length=128, description="A MIG slice's card, by UUID")
    unhealthy: str | None = Field(
        default=None, max_length=255, description="Why the device is in trouble; absent: healthy"
    )


#: One resource sample: what the worker's probe saw, bounded by its cgroup.
class ResourcesInfo(Strict):
    cpu_total: float = Field(ge=0)
    cpu_available: float = Field(ge=0)
    cpu_percent: float = 0.0
    memory_total: int = Field(ge=0)
    memory_available: int = Field(ge=0)
    disk_total: int = Field(ge=0)
    disk_free: int = Field(ge=0)
    capacity: dict[str, Number] = Field(
        default={}, description="Probed dimensions beyond cpu, memory and disk: name -> total"
    )
    available: dict[str, Number] = Field(default={}, description="The same dimensions: name -> available now")
    gpus: list[GPUInfo] = []
    sampled_at: str | None = None

    @field_validator("capacity", "available")
    @classmethod
    def _valid_dimensions(cls, value: dict[str, Number]) -> dict[str, Number]:
        problem = probed_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class PackageInfo(Strict):
    name: str
    version: str


class RuntimeInfo(Strict):
    python_version: str
    os_name: str
    os_version: str
    hostname: str
    cpu_arch: str = ""


class WorkerRegistration(Strict):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")
    labels: dict[str, str] = {}
    max_concurrent_executions: int = Field(default=1, ge=1, le=10_000)
    heartbeat_interval: float = Field(default=5.0, gt=0, le=3600)
    allocation: Literal[AllocationMode.SAMPLE.value, AllocationMode.RESERVE.value] = AllocationMode.SAMPLE.value
    custom_resources: dict[str, float] = Field(default={}, description="Countable custom resources, e.g. {'fpga': 2}")
    resources: ResourcesInfo
    packages: list[PackageInfo] = []
    runtime: RuntimeInfo
    running: list[str] = Field(default=[], description="Executions this worker process still runs")
    metrics: dict[str, float] = {}
    namespaces: list[str] | None = Field(
        default=None, description="The only namespaces whose executions it takes (a dedicated pool); null: every one"
    )

    @field_validator("namespaces")
    @classmethod
    def _valid_namespaces(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else list(worker_namespaces(value)) or None

    @field_validator("custom_resources")
    @classmethod
    def _valid_custom_resources(cls, value: dict[str, float]) -> dict[str, float]:
        try:
            return dict(parse_custom_resources(value, "custom_resources"))
        except InvalidResourceRequest as exc:
            raise ValueError(str(exc)) from None


class RegistrationReply(BaseModel):
    session_token: str
    abandon: list[str] = Field(description="Executions the worker must stop: they are no longer its own")
    heartbeat_interval: float | None = Field(default=None, description=PACED)
