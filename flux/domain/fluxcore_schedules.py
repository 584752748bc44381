"""A schedule declared in code, on the workflow (``schedule=cron("0 9 * * *")``), in
flux-core's words: ``cron``, ``interval`` and ``once`` build a ``DeclaredSchedule``
(``CronSchedule``, ``IntervalSchedule``, ``OnceSchedule``, with flux-core's attributes)
that registration turns into a server schedule named after the workflow
(docs/migrating-from-flux-core.md, docs/schedules.md). Each wraps one of our schedule
values (``flux.domain.schedules``). Pure: the decorator and the static reader both call
these.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from typing import Any

from flux.domain.schedules import InvalidSchedule, OverlapPolicy, Schedule

#: flux-core's overlap words as ours: "allow" started every run.
OVERLAPS = {"skip": OverlapPolicy.SKIP, "allow": OverlapPolicy.ALLOW_ALL}


@dataclass(frozen=True, repr=False)
class DeclaredSchedule:
    """When the workflow runs by itself, and what a due time does while one still runs."""

    schedule: Schedule
    overlap: OverlapPolicy = OverlapPolicy.SKIP

    def __repr__(self) -> str:
        """flux-core's: its class by flux-core's path and the object's address (``to_dict()`` says what it is)."""
        return f"<flux.domain.schedule.{type(self).__name__} object at {id(self):#x}>"

    @property
    def timezone(self) -> str:
        return self.schedule.timezone

    def request(self) -> dict[str, Any]:
        """The fields of a ``POST /schedules`` body (``ScheduleCreate``) this stands for."""
        spec = self.schedule
        body: dict[str, Any] = {"timezone": spec.timezone, "overlap": self.overlap.value}
        if spec.cron is not None:
            body["cron"] = spec.cron
        elif spec.every is not None:
            body["every"] = spec.every
            if spec.anchor:
                body["anchor"] = spec.anchor
        else:
            body["at"] = spec.at
        return body

    @classmethod
    def from_request(cls, body: dict[str, Any]) -> "DeclaredSchedule":
        timing = {key: body.get(key) for key in ("cron", "every", "at", "anchor")}
        return cls(
            Schedule.parse(**timing, timezone=body.get("timezone", "UTC")), _overlap(body.get("overlap", "skip"))
        )

    def next_run_time(self, after: datetime.datetime | None = None) -> datetime.datetime | None:
        """flux-core's: the next due time after ``after`` (default now), in the schedule's zone."""
        moment = after.timestamp() if after is not None else time.time()
        due = self.schedule.after(moment)
        return None if due is None else datetime.datetime.fromtimestamp(due, self.schedule.zone)

    def to_dict(self) -> dict[str, Any]:
        """flux-core's description (``type``: cron, interval or once)."""
        return {
            "type": self.kind,
            **self._fields(),
            "timezone": self.timezone,
            "overlap": _flux_core_overlap(self.overlap),
        }

    kind = "schedule"

    def _fields(self) -> dict[str, Any]:
        return {}


class CronSchedule(DeclaredSchedule):
    kind = "cron"

    @property
    def cron_expression(self) -> str:
        return self.schedule.cron or ""

    def _fields(self) -> dict[str, Any]:
        return {"cron_expression": self.cron_expression}


class IntervalSchedule(DeclaredSchedule):
    kind = "interval"

    @property
    def interval(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.schedule.every or 0)

    def _fields(self) -> dict[str, Any]:
        return {"interval_seconds": int(self.schedule.every or 0)}


class OnceSchedule(DeclaredSchedule):
    kind = "once"

    @property
    def run_time(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.schedule.at or 0, self.schedule.zone)

    def _fields(self) -> dict[str, Any]:
        return {"run_time": self.run_time.isoformat()}


def _overlap(overlap: str) -> OverlapPolicy:
    try:
        return OVERLAPS.get(overlap) or OverlapPolicy(overlap)
    except ValueError:
        raise InvalidSchedule(
            f"overlap must be one of skip, allow ({', '.join(p.value for p in OverlapPolicy)}), got {overlap!r}"
        ) from None


def _flux_core_overlap(overlap: OverlapPolicy) -> str:
    return next((word for word, policy in OVERLAPS.items() if policy is overlap), overlap.value)


def _moment(value: datetime.datetime | float | int | str | None) -> float | str | None:
    return value.timestamp() if isinstance(value, datetime.datetime) else value


def cron(expression: str, timezone: str = "UTC", overlap: str = "skip") -> CronSchedule:
    """flux-core's ``cron("0 9 * * MON-FRI", timezone=...)``."""
    return CronSchedule(Schedule.parse(cron=expression, timezone=timezone), _overlap(overlap))


def interval(
    seconds: float = 0,
    minutes: float = 0,
    hours: float = 0,
    days: float = 0,
    weeks: float = 0,
    timezone: str = "UTC",
    start_time: datetime.datetime | None = None,
    end_time: datetime.datetime | None = None,
    overlap: str = "skip",
) -> IntervalSchedule:
    """flux-core's ``interval(hours=1)``: every so long, on a grid from ``start_time``.
    ``end_time`` has no counterpart here and is refused, naming it."""
    if end_time is not None:
        raise InvalidSchedule("interval(end_time=...) is flux-core's; here a schedule runs until paused or deleted")
    every = datetime.timedelta(seconds=seconds, minutes=minutes, hours=hours, days=days, weeks=weeks).total_seconds()
    if every <= 0:
        raise InvalidSchedule("interval needs a positive length (seconds=, minutes=, hours=, days= or weeks=)")
    return IntervalSchedule(
        Schedule.parse(every=every, anchor=_moment(start_time), timezone=timezone), _overlap(overlap)
    )


def once(run_time: datetime.datetime | float | str, timezone: str = "UTC", overlap: str = "skip") -> OnceSchedule:
    """flux-core's ``once(datetime(...))``: one run at that time."""
    return OnceSchedule(Schedule.parse(at=_moment(run_time), timezone=timezone), _overlap(overlap))
