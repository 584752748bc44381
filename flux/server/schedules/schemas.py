"""Pydantic models of the schedule API (``/schedules``). Their validators run the
domain's parsers (``flux.domain.schedules``), so a bad cron, zone, interval or policy
is a 422 naming the field before anything is stored; the client and CLI use the same
parsers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from flux.domain.names import NAME_PATTERN, check_name
from flux.domain.priority import check_priority
from flux.domain.schedules import (
    MAX_JITTER,
    InvalidSchedule,
    Schedule,
    check_jitter,
    normalise_cron,
    parse_duration,
    parse_timezone,
)
from flux.server.schemas import Priority, Strict

#: Seconds, or a duration string such as "30s", "5m", "1h30m".
Duration = float | str
#: An ISO 8601 time (without an offset: in the schedule's time zone), or epoch seconds.
Moment = str | float

#: The values of ``OverlapPolicy`` and ``CatchUpPolicy`` (a strict model takes a JSON string
#: for a Literal, not for an Enum).
Overlap = Literal["skip", "queue_one", "allow_all", "cancel_previous"]
CatchUp = Literal["latest", "all", "none"]


class _Timing(Strict):
    """The fields shared by creation and update."""

    version: int | None = Field(default=None, ge=1, description="A workflow version; null: the newest at each fire")
    cron: str | None = Field(
        default=None, max_length=255, description="5 or 6 fields (seconds first), or @daily, @hourly, ..."
    )
    every: Duration | None = Field(default=None, description="Seconds or a duration such as '30s', '5m', '1h30m'")
    at: Moment | None = Field(default=None, description="Once, at this ISO 8601 time (or epoch seconds)")
    anchor: Moment | None = Field(default=None, description="For every: a time on the grid (default the Unix epoch)")
    input: Any = None
    catch_up_limit: int | None = Field(
        default=None, ge=1, le=1000, description="For catch_up=all: the newest missed due times fired"
    )
    jitter: float | None = Field(
        default=None,
        ge=0,
        le=MAX_JITTER,
        description="Up to this many seconds later than due, the same delay on every replica",
    )
    priority: Priority | None = Field(
        default=None, description="Its runs' priority (a class name or an int); null: the workflow's"
    )

    @field_validator("priority")
    @classmethod
    def _priority(cls, value: Priority | None) -> Priority | None:
        return None if value is None else str(check_priority(value, "priority"))

    @field_validator("jitter")
    @classmethod
    def _jitter(cls, value: float | None) -> float | None:
        if value is not None:
            _checked(lambda: check_jitter(value))
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            _checked(lambda: normalise_cron(value))
        return value

    @field_validator("every")
    @classmethod
    def _every(cls, value: Duration | None) -> Duration | None:
        if value is not None:
            _checked(lambda: parse_duration(value))
        return value

    @field_validator("timezone", check_fields=False)
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is not None:
            _checked(lambda: parse_timezone(value))
        return value


def _checked(parse):  # noqa: ANN001, ANN202
    """The domain's reason, as a field error without pydantic's "Value error, " prefix."""
    try:
        return parse()
    except InvalidSchedule as exc:
        raise PydanticCustomError("invalid_schedule", str(exc)) from None


class ScheduleCreate(_Timing):
    name: str = Field(
        json_schema_extra={"pattern": NAME_PATTERN}, description="1-128 of A-Z a-z 0-9 _ - . ; not starting with ."
    )
    workflow: str = Field(min_length=1, max_length=128)
    timezone: str = Field(
        default="UTC", max_length=64, description="IANA time zone of the cron grid and of times without offset"
    )
    overlap: Overlap = Field(
        default="skip", description="While the previous run is active: skip, queue_one, allow_all, cancel_previous"
    )
    catch_up: CatchUp = Field(
        default="latest", description="Due times missed while no server ran: latest, all (up to catch_up_limit), none"
    )
    paused: bool = False

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_name(value)

    @model_validator(mode="after")
    def _valid_timing(self) -> "ScheduleCreate":
        _checked(
            lambda: Schedule.parse(
                cron=self.cron, every=self.every, at=self.at, anchor=self.anchor, timezone=self.timezone
            )
        )
        return self


class ScheduleUpdate(_Timing):
    """Only the fields given change; giving one of cron, every or at replaces the kind."""

    workflow: str | None = Field(default=None, min_length=1, max_length=128)
    timezone: str | None = Field(default=None, max_length=64)
    overlap: Overlap | None = None
    catch_up: CatchUp | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "ScheduleUpdate":
        kinds = [name for name in ("cron", "every", "at") if getattr(self, name) is not None]
        if len(kinds) > 1:
            raise ValueError(f"give at most one of cron, every or at (got {', '.join(kinds)})")
        return self


class ScheduleInfo(BaseModel):
    name: str
    workflow: str
    version: int | None
    kind: str = Field(description="cron, every or at")
    cron: str | None
    every: float | None = Field(description="Seconds")
    at: str | None = Field(description="ISO 8601, in the schedule's time zone")
    anchor: str | None = Field(description="For every: ISO 8601, in the schedule's time zone")
    timezone: str
    input: Any
    overlap: Overlap
    catch_up: CatchUp
    catch_up_limit: int
    jitter: float
    paused: bool
    priority: str | None = Field(
        default=None, description="Its runs' priority (a class name or an int); null: the workflow's"
    )
    paused_reason: str | None = Field(
        default=None,
        description=(
            "Why the server paused it (its timing lies outside what the API accepts); null: by hand or not paused"
        ),
    )
    next_fire_times: list[str] = Field(
        description="The next due times (ISO 8601, in its time zone); empty while paused or done"
    )
    queued_for: str | None = Field(
        default=None, description="overlap=queue_one: the due time held until the active run ends"
    )
    created_at: float
    updated_at: float
