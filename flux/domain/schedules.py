"""Schedules as pure values: when a schedule is due, and what to fire after downtime.

A schedule has one kind (docs/schedules.md):

- ``cron``: a 5-field (minute precision) or 6-field (seconds first) expression, or an
  alias such as ``@daily``, evaluated by cronsim in an IANA time zone. DST follows
  cronsim (as Debian's cron does): a time skipped by a spring-forward runs once, at the
  first instant after the gap (02:30 on that day fires at 03:00); a time repeated by a
  fall-back runs once; expressions with a wildcard hour run on elapsed time.
- ``every``: a fixed interval in seconds, on the grid ``anchor + k * every`` (anchor by
  default the Unix epoch, so ``every 60s`` fires on whole minutes, like Temporal).
- ``at``: once, at a time.

Times cross this module as Unix epoch seconds (floats), as everywhere in Flux; the
time zone only shapes the cron grid and how times are shown. Used by the server (the
firing loop), and by the client and CLI to refuse bad input before sending it.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from flux.domain import durations


class InvalidSchedule(ValueError):
    """A schedule that cannot be: the message says which field and why."""


class OverlapPolicy(str, Enum):
    """What a due time does while the schedule's previous run is still active (any
    non-terminal state, SCHEDULED included)."""

    SKIP = "skip"
    QUEUE_ONE = "queue_one"
    ALLOW_ALL = "allow_all"
    CANCEL_PREVIOUS = "cancel_previous"


class CatchUpPolicy(str, Enum):
    """What the due times missed while no server could fire them become."""

    LATEST = "latest"
    ALL = "all"
    NONE = "none"


KINDS = ("cron", "every", "at")
#: cron aliases (as in Vixie cron and croniter); cronsim takes the fields only.
ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
#: The most a due time is ever late and still on time: a longer gap than this to the
#: next due time does not widen the window (Quartz's misfire threshold, 60 s).
MAX_ON_TIME = 60.0
#: Due times considered per schedule in one pass after downtime; older ones are skipped.
MAX_PENDING = 1000
#: The longest jitter: an hour.
MAX_JITTER = 3600.0


def parse_duration(value: float | int | str, field: str = "every") -> float:
    """Seconds from a number or a duration string (``flux.domain.durations``): ``30``, ``"5m"``, ``"1h30m"``."""
    try:
        return durations.parse_duration(value, field)
    except durations.InvalidDuration as exc:
        raise InvalidSchedule(str(exc)) from None


def parse_timezone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidSchedule(f"timezone: unknown IANA time zone {name!r} (e.g. 'UTC', 'Europe/Paris')") from None


def normalise_cron(expr: str) -> str:
    """The expression's fields (an alias expanded), checked by cronsim."""
    text = " ".join(str(expr).split())
    fields = ALIASES.get(text.lower(), text)
    if len(fields.split()) not in (5, 6):
        raise InvalidSchedule(f"cron: {expr!r} needs 5 fields (minute hour day month weekday), 6 (seconds first) or an alias such as @daily")
    try:
        CronSim(fields, datetime(2000, 1, 1, tzinfo=timezone.utc))
    except (CronSimError, ValueError) as exc:
        raise InvalidSchedule(f"cron: {expr!r} is not a valid expression: {exc}") from None
    return fields


def parse_time(value: float | int | str, zone: ZoneInfo, field: str) -> float:
    """Epoch seconds from a number or an ISO 8601 time; a time without offset is in ``zone``."""
    if isinstance(value, bool):
        raise InvalidSchedule(f"{field}: expected an ISO 8601 time or epoch seconds")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise InvalidSchedule(f"{field}: {value!r} is not a time")
        return float(value)
    try:
        moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSchedule(f"{field}: {value!r} is not an ISO 8601 time (e.g. '2030-01-01T09:00:00+01:00')") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.timestamp()


def iso(epoch: float, zone: ZoneInfo) -> str:
    """How a schedule shows a time: ISO 8601 in its own time zone, with the offset."""
    return datetime.fromtimestamp(epoch, zone).isoformat()


@dataclass(frozen=True)
class Schedule:
    """When a schedule is due: exactly one of ``cron``, ``every`` (seconds) or ``at``
    (epoch seconds). Build it with ``Schedule.parse`` to validate what people typed."""

    cron: str | None = None
    every: float | None = None
    at: float | None = None
    anchor: float = 0.0
    timezone: str = "UTC"

    @classmethod
    def parse(cls, *, cron: str | None = None, every: float | int | str | None = None, at: float | int | str | None = None,
              anchor: float | int | str | None = None, timezone: str = "UTC") -> "Schedule":
        given = [name for name, value in (("cron", cron), ("every", every), ("at", at)) if value is not None]
        if len(given) != 1:
            raise InvalidSchedule(f"give exactly one of cron, every or at (got {', '.join(given) or 'none'})")
        zone = parse_timezone(timezone)
        if anchor is not None and every is None:
            raise InvalidSchedule("anchor: only an 'every' schedule has an anchor")
        return cls(
            cron=normalise_cron(cron) if cron is not None else None,
            every=parse_duration(every) if every is not None else None,
            at=parse_time(at, zone, "at") if at is not None else None,
            anchor=parse_time(anchor, zone, "anchor") if anchor is not None else 0.0,
            timezone=timezone,
        )

    @property
    def kind(self) -> str:
        return "cron" if self.cron is not None else "every" if self.every is not None else "at"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def after(self, moment: float) -> float | None:
        """The first due time strictly after ``moment``; None when there is none (a one-off past)."""
        if self.every is not None:
            steps = math.floor((moment - self.anchor) / self.every) + 1
            due = self.anchor + steps * self.every
            return due if due > moment else due + self.every
        if self.at is not None:
            return self.at if self.at > moment else None
        start = datetime.fromtimestamp(moment, self.zone)
        return next(CronSim(self.cron, start)).timestamp()

    def upcoming(self, moment: float, count: int) -> list[float]:
        """The next ``count`` due times after ``moment``."""
        times: list[float] = []
        due = self.after(moment)
        while due is not None and len(times) < count:
            times.append(due)
            due = self.after(due)
        return times

    def window(self, due: float) -> float:
        """How late ``due`` may be reached and still be on time: half the gap to the
        next due time, at most ``MAX_ON_TIME`` (a one-off: ``MAX_ON_TIME``)."""
        following = self.after(due)
        return MAX_ON_TIME if following is None else min(MAX_ON_TIME, (following - due) / 2)


@dataclass(frozen=True)
class Plan:
    """What one pass does with a schedule's due times up to now."""

    fire: list[float]  # due times to fire, oldest first
    skipped: int  # due times passed over by the catch-up policy
    next_due: float | None  # the first due time after this pass (None: nothing more)


def plan(schedule: Schedule, next_due: float | None, now: float, catch_up: CatchUpPolicy, limit: int) -> Plan:
    """The due times in ``[next_due, now]``: on-time ones fire; missed ones (reached later
    than ``Schedule.window``) follow the catch-up policy: ``all`` fires the newest
    ``limit`` of them, ``latest`` the newest one, ``none`` none."""
    pending: list[float] = []
    skipped = 0
    due = next_due
    while due is not None and due <= now:
        if len(pending) == MAX_PENDING:  # long downtime on a dense schedule: restart near now
            skipped += len(pending)
            span = pending[-1] - pending[0]
            pending, due = [], schedule.after(max(due, now - span))
            continue
        pending.append(due)
        due = schedule.after(due)
    on_time = [d for d in pending if now - d <= schedule.window(d)]
    missed = pending[: len(pending) - len(on_time)]
    kept = {CatchUpPolicy.ALL: missed[-limit:] if limit > 0 else [], CatchUpPolicy.LATEST: missed[-1:], CatchUpPolicy.NONE: []}[catch_up]
    return Plan(fire=kept + on_time, skipped=skipped + len(missed) - len(kept), next_due=due)


def jitter_offset(name: str, due: float, jitter: float) -> float:
    """A delay in ``[0, jitter)`` seconds for this due time, the same on every replica
    (a hash of the schedule's name and the due time, not a random draw)."""
    if jitter <= 0:
        return 0.0
    return zlib.crc32(f"{name}@{due!r}".encode()) / 2**32 * jitter


def check_jitter(value: float) -> float:
    if not math.isfinite(value) or value < 0 or value > MAX_JITTER:
        raise InvalidSchedule(f"jitter: must be between 0 and {MAX_JITTER:g} seconds, not {value!r}")
    return float(value)
