"""Schedules on the server (docs/schedules.md): ``store`` (the rows: create, change,
pause, trigger), ``firing`` (one pass: due schedules to executions, exactly once per
due time), ``loop`` (when to run a pass), ``routes`` (``/schedules``), ``schemas``
(their bodies). When a schedule is due is pure code: ``flux.domain.schedules``."""

from flux.server.schedules.loop import ScheduleLoop
from flux.server.schedules.routes import router

__all__ = ["ScheduleLoop", "router"]
