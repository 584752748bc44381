"""A worker's claim: the long poll, and the job of each attempt placed on it.

The job carries what the placement set aside (``allotment``, a
``flux.domain.allotment.Allotment``): the runner's ceilings (cpu, memory) and device
pinning (GPU indexes) read it and nothing else. ``requests`` and ``gpus`` stay for
older workers."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, PlainSerializer, PlainValidator, model_serializer

from flux.domain.allotment import EMPTY, Allotment
from flux.protocol.base import Number, Strict
from flux.protocol.gangs import GangSeat


class _SetFieldsOnly(BaseModel):
    """A JSON form in which a field that is not set is absent, not null."""

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler):  # noqa: ANN001, ANN202
        return {name: value for name, value in handler(self).items() if value is not None}


class RequestsJSON(_SetFieldsOnly):
    """A stored ResourceRequest (``ResourceRequest.to_dict``): only the fields that are set."""

    cpu: Number | None = None
    memory: int | None = Field(default=None, description="Bytes")
    disk: int | None = Field(default=None, description="Bytes")
    gpu: Number | None = Field(default=None, description="Whole cards, or a fraction of one card (0 < gpu < 1)")
    gpu_memory: int | None = Field(default=None, description="Bytes of device memory on each allotted card")
    packages: list[str] | None = Field(default=None, description="PEP 508 requirements, e.g. 'torch>=2.0'")
    resources: dict[str, Number] | None = Field(
        default=None, description="Countable custom resources, e.g. {'fpga': 1}"
    )


class DeviceShareJSON(_SetFieldsOnly):
    """One allotted GPU (``DeviceShare``): a whole card unless ``fraction`` or ``memory`` says otherwise."""

    uuid: str
    index: int | None = None
    fraction: Number | None = Field(default=None, description="Share of the card (absent: the whole card)")
    memory: int | None = Field(default=None, description="Bytes of device memory set aside")


class AllotmentJSON(_SetFieldsOnly):
    """An allotment's JSON form (``Allotment.to_json``): only what was set aside."""

    cpu: Number | None = Field(default=None, description="Cores")
    memory: int | None = Field(default=None, description="Bytes")
    disk: int | None = Field(default=None, description="Bytes")
    gpus: list[int] | None = Field(default=None, description="GPU indexes: the execution sees only these cards")
    devices: list[DeviceShareJSON] | None = Field(
        default=None, description="The allotted GPUs by UUID, with the fraction and memory set aside on each"
    )
    resources: dict[str, Number] | None = Field(default=None, description="Custom resources, e.g. {'fpga': 1}")


def _allotment(value: Any) -> Allotment:
    if isinstance(value, Allotment):
        return value
    return Allotment.from_json(AllotmentJSON.model_validate(value).model_dump())


#: An ``Allotment`` in a message: its JSON form on the wire, the domain value in Python.
AllotmentField = Annotated[
    Allotment,
    PlainValidator(_allotment, json_schema_input_type=AllotmentJSON),
    PlainSerializer(lambda value: AllotmentJSON.model_validate(value.to_json()), return_type=AllotmentJSON),
]


class ClaimRequest(Strict):
    wait: float = Field(default=20.0, ge=0, le=60)


class ClaimedExecution(BaseModel):
    id: str
    workflow_name: str
    workflow_version: int
    source: str
    filename: str
    bundle: str | None = Field(
        default=None, description="The sha256 of the bundle to fetch (GET /bundles/SHA256) and import"
    )
    module: str | None = Field(default=None, description="The bundle's module that defines the workflow")
    input: Any
    attempt: int
    completed_tasks: dict[str, Any]
    requests: RequestsJSON | None = None
    gpus: list[int] | None = Field(default=None, description="GPU indexes allotted to this execution")
    allotment: AllotmentField = Field(
        default=EMPTY,
        description="What its placement set aside (cpu, memory, disk, gpus, resources): what the runner enforces",
    )
    traceparent: str | None = Field(default=None, description="W3C trace context of this attempt's spans (tracing on)")
    max_payload_size: int | None = Field(
        default=None, description="A task result or the output larger than this (JSON bytes) fails"
    )
    max_json_depth: int | None = Field(
        default=None,
        description="The server's nesting limit: a task result or the output nested past it in a checkpoint fails",
    )
    recorded: dict[str, Any] = Field(
        default_factory=dict, description="Values of deterministic builtins (now, uuid4, ...) by call id, for a replay"
    )
    rolled_back: list[str] = Field(
        default_factory=list, description="Task ids whose rollback ended in an earlier attempt (not run again)"
    )
    gang: GangSeat | None = Field(
        default=None, description="A gang member's seat: rendezvous before user code runs (docs/gangs.md)"
    )


class PreemptionNotice(BaseModel):
    """A running attempt must make room for a more important execution (docs/contention.md):
    the workflow sees ``flux.current_task().preempting``; at the end of ``seconds`` the
    worker stops it and reports its attempt ended ``preempted``."""

    execution_id: str
    attempt: int
    by: str | None = Field(default=None, description="The execution it makes room for")
    seconds: float = Field(description="Seconds left of the grace period when the server replied")


class PreemptionWithdrawal(BaseModel):
    """A preemption called off in its grace period (docs/contention.md): the attempt goes on,
    and ``flux.current_task().preempting`` is falsy again."""

    execution_id: str
    attempt: int


class ClaimReply(BaseModel):
    executions: list[ClaimedExecution]
    cancel: list[str]
    preempt: list[PreemptionNotice] = Field(default=[], description="Running attempts to end after a grace period")
    withdrawn: list[PreemptionWithdrawal] = Field(
        default=[], description="Preemptions called off: those attempts go on"
    )
