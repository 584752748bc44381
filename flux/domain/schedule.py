"""flux-core's import path of its schedule constructors (``from flux.domain.schedule import
cron, IntervalSchedule``): ``flux.domain.fluxcore_schedules`` under that name."""

from flux.domain.fluxcore_schedules import (
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
