"""flux-core's import path of its schedule constructors (``from flux.domain.schedule import
cron, IntervalSchedule``): ``flux.domain.declared_schedules`` under that name."""

from flux.domain.declared_schedules import (
    CronSchedule,
    DeclaredSchedule,
    IntervalSchedule,
    OnceSchedule,
    cron,
    interval,
    once,
)

Schedule = DeclaredSchedule

__all__ = ["CronSchedule", "IntervalSchedule", "OnceSchedule", "Schedule", "cron", "interval", "once"]
