"""Pydantic models of the hooks API (``/hooks``, docs/hooks.md). Event names are
checked by the domain's parser, so an unknown one is a 422 naming the known ones."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from flux.domain.hooks import HookEventType, parse_event_types
from flux.domain.names import NAME_PATTERN, check_name
from flux.server.schemas import Strict

#: Longest hook URL.
MAX_URL = 2048
DeliveryState = Literal["pending", "delivered", "dead"]


class HookCreate(Strict):
    name: str = Field(
        json_schema_extra={"pattern": NAME_PATTERN}, description="1-128 of A-Z a-z 0-9 _ - . ; not starting with ."
    )
    url: str = Field(min_length=1, max_length=MAX_URL, description="http(s) URL the events are POSTed to")
    events: list[str] = Field(
        min_length=1, max_length=32, description="Event types, e.g. execution.failed, worker.evicted"
    )
    workflow: str | None = Field(
        default=None, min_length=1, max_length=128, description="Only this workflow's executions and schedules"
    )
    secret: str | None = Field(
        default=None,
        min_length=16,
        max_length=256,
        description="The signing secret; none given: the server makes one and returns it once",
    )

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_name(value, "hook")

    @field_validator("events")
    @classmethod
    def _known_events(cls, value: list[str]) -> list[str]:
        return [t.value for t in parse_event_types(value)]

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.lower().startswith(("http://", "https://")):
            raise ValueError("a hook's url is http:// or https://")
        return value


class HookInfo(BaseModel):
    name: str
    namespace: str
    url: str
    events: list[HookEventType]
    workflow: str | None
    created_at: float
    #: Only in the answer to its creation when the server made it: never shown again.
    secret: str | None = None
    pending: int = Field(default=0, description="Deliveries not yet delivered or dead")
    dead: int = 0


class AttemptInfo(BaseModel):
    number: int
    at: float
    status_code: int | None = Field(description="The receiver's HTTP status; null: no answer (see error)")
    latency: float = Field(description="Seconds from sending to the answer (or the failure)")
    error: str | None


class DeliveryInfo(BaseModel):
    id: str = Field(description="The stable delivery id: the same on every attempt and redelivery")
    type: str
    state: DeliveryState
    created_at: float
    next_attempt_at: float | None = Field(description="While pending: when it is tried next")
    finished_at: float | None
    attempts: list[AttemptInfo]
    body: dict[str, Any] | None = Field(default=None, description="What is POSTed (GET of one delivery only)")
