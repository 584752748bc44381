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
from datetime import UTC, datetime
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
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
#: The most a due time is ever late and still on time: a longer gap than this to the
#: next due time does not widen the window (Quartz's misfire threshold, 60 s).
MAX_ON_TIME = 60.0
#: Due times considered per schedule in one pass after downtime; older ones are skipped.
MAX_PENDING = 1000
#: The longest jitter: an hour.
MAX_JITTER = 3600.0
#: The shortest interval: a second, the finest cron grid. Below it float precision
#: stops a due time from advancing (``after(t) > t``), so the domain ends here.
MIN_EVERY = 1.0
#: The longest interval: 100 years of 365 days.
MAX_EVERY = 100 * 365 * 86400.0
#: Times a schedule takes or reaches (``at``, ``anchor``, due times): from the Unix
#: epoch to 9999-12-31T00:00:00Z, which every time zone can still show as a date.
MIN_TIME = 0.0
MAX_TIME = datetime(9999, 12, 31, tzinfo=UTC).timestamp()


def parse_duration(value: float | int | str, field: str = "every") -> float:
    """Seconds from a number or a duration string (``flux.domain.durations``): ``30``, ``"5m"``, ``"1h30m"``."""
    try:
        seconds = durations.parse_duration(value, field)
    except durations.InvalidDuration as exc:
        raise InvalidSchedule(str(exc)) from None
    if not MIN_EVERY <= seconds <= MAX_EVERY:
        raise InvalidSchedule(
            f"{field}: must be between {MIN_EVERY:g} second and {MAX_EVERY:g} seconds (100 years), not {value!r}"
        )
    return seconds


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
        raise InvalidSchedule(
            f"cron: {expr!r} needs 5 fields (minute hour day month weekday), 6 (seconds first)"
            " or an alias such as @daily"
        )
    try:
        CronSim(fields, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError) as exc:
        raise InvalidSchedule(f"cron: {expr!r} is not a valid expression: {exc}") from None
    return fields


def parse_time(value: float | int | str, zone: ZoneInfo, field: str) -> float:
    """Epoch seconds from a number or an ISO 8601 time; a time without offset is in ``zone``."""
    if isinstance(value, bool):
        raise InvalidSchedule(f"{field}: expected an ISO 8601 time or epoch seconds")
    if isinstance(value, (int, float)):
        return _in_range(value, value, field)
    try:
        moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSchedule(
            f"{field}: {value!r} is not an ISO 8601 time (e.g. '2030-01-01T09:00:00+01:00')"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return _in_range(moment.timestamp(), value, field)


def _in_range(epoch: float | int, given: object, field: str) -> float:
    """``epoch`` as a float, when it lies in ``[MIN_TIME, MAX_TIME]`` (compared before
    converting: an int too large for a float is refused, not an OverflowError)."""
    if not MIN_TIME <= epoch <= MAX_TIME:  # also NaN
        raise InvalidSchedule(f"{field}: {given!r} is not a time between 1970-01-01 and 9999-12-31 (UTC)")
    return float(epoch)


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
    def parse(
        cls,
        *,
        cron: str | None = None,
        every: float | int | str | None = None,
        at: float | int | str | None = None,
        anchor: float | int | str | None = None,
        timezone: str = "UTC",
    ) -> "Schedule":
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

    def problem(self) -> str | None:
        """Why this schedule lies outside what ``parse`` accepts (one stored by an older
        version, say), or None: only accepted schedules are sure to advance."""
        try:
            Schedule.parse(
                cron=self.cron,
                every=self.every,
                at=self.at,
                timezone=self.timezone,
                anchor=self.anchor if self.every is not None else None,
            )
        except InvalidSchedule as exc:
            return str(exc)
        return None

    def after(self, moment: float) -> float | None:
        """The first due time strictly after ``moment``; None when there is none (a one-off
        past, or nothing before ``MAX_TIME``)."""
        if self.every is not None:
            steps = math.floor((moment - self.anchor) / self.every) + 1
            due = self.anchor + steps * self.every
            due = due if due > moment else due + self.every
        elif self.at is not None:
            due = self.at if self.at > moment else None
        else:
            try:
                due = next(CronSim(self.cron, datetime.fromtimestamp(moment, self.zone))).timestamp()
            except (OverflowError, ValueError, StopIteration):  # past year 9999
                due = None
        return due if due is not None and due <= MAX_TIME else None

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


class StuckSchedule(InvalidSchedule):
    """A due time that does not advance: ``after(due) <= due`` (only a schedule outside
    the accepted domain can do this; the server pauses it with this reason)."""


def plan(schedule: Schedule, next_due: float | None, now: float, catch_up: CatchUpPolicy, limit: int) -> Plan:
    """The due times in ``[next_due, now]``: on-time ones fire; missed ones (reached later
    than ``Schedule.window``) follow the catch-up policy: ``all`` fires the newest
    ``limit`` of them, ``latest`` the newest one, ``none`` none.

    Bounded work: at most ``MAX_PENDING`` due times are held; past that the older ones
    are skipped and the walk restarts near now (first one span of them before now,
    then ``2 * MAX_ON_TIME`` before now, which holds fewer than ``MAX_PENDING`` due
    times a second apart), so a pass takes at most about ``2 * MAX_PENDING + 121``
    steps. ``StuckSchedule`` if a due time does not advance."""
    pending: list[float] = []
    skipped = restarts = 0
    due = next_due
    while due is not None and due <= now:
        if len(pending) == MAX_PENDING:  # long downtime on a dense schedule: restart near now
            skipped += len(pending)
            restarts += 1
            back = pending[-1] - pending[0] if restarts == 1 else 2 * MAX_ON_TIME
            pending, due = [], schedule.after(max(due, now - back))
            if restarts > 2:
                raise StuckSchedule(f"{schedule.kind}: more than {MAX_PENDING} due times in {back:g} seconds")
            continue
        pending.append(due)
        following = schedule.after(due)
        if following is not None and not following > due:
            raise StuckSchedule(f"{schedule.kind}: its due time does not advance past {due!r}")
        due = following
    on_time = [d for d in pending if now - d <= schedule.window(d)]
    missed = pending[: len(pending) - len(on_time)]
    kept = {
        CatchUpPolicy.ALL: missed[-limit:] if limit > 0 else [],
        CatchUpPolicy.LATEST: missed[-1:],
        CatchUpPolicy.NONE: [],
    }[catch_up]
    return Plan(fire=kept + on_time, skipped=skipped + len(missed) - len(kept), next_due=due)


def jitter_offset(name: str, due: float, jitter: float) -> float:
    """A delay in ``[0, jitter)`` seconds for this due time, the same on every replica
    (a hash of the schedule's name and the due time, not a random draw)."""
    if jitter <= 0:
        return 0.0
    return zlib.crc32(f"{name}@{due!r}".encode()) / 2**32 * jitter


def check_jitter(value: float) -> float:
    if not 0 <= value <= MAX_JITTER:  # also NaN, and ints too large for a float
        raise InvalidSchedule(f"jitter: must be between 0 and {MAX_JITTER:g} seconds, not {value!r}")
    return float(value)
