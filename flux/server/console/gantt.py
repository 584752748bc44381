"""An execution's tasks on a time axis, from its event log: one bar per try of each task
call (``TASK_STARTED`` → ``TASK_COMPLETED`` / ``TASK_FAILED``), within each attempt of
the execution (``ATTEMPT_STARTED`` / ``ATTEMPT_ENDED``). A bar still open when its
attempt ended was interrupted (a crash, a drain); one open now is running. A gang's
chart is its members', one row per rank (``members_gantt``): its own row runs no task."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flux.domain.events import EventType
from flux.protocol.failures import Failure


@dataclass
class Bar:
    task_id: str
    name: str
    #: The execution's attempt (a worker's run) and the task's own try within it.
    attempt: int
    retry: int
    start: float
    end: float | None = None
    #: completed, failed (will retry or not), interrupted (its attempt ended), running.
    outcome: str = "running"
    error: str | None = None
    left: float = 0.0
    width: float = 0.0


@dataclass
class Gantt:
    bars: list[Bar] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0
    attempts: list[tuple[int, float]] = field(default_factory=list)

    @property
    def span(self) -> float:
        return max(self.end - self.start, 0.0)


def gantt(events: list[dict[str, Any]], now: float) -> Gantt:
    """``events``: the execution's log as ``GET /executions/ID/events`` gives it."""
    chart, attempt = Gantt(), 0
    open_bars: dict[str, Bar] = {}
    for event in events:
        kind, value, at = event["type"], event.get("value"), event["time"]
        if kind == EventType.ATTEMPT_STARTED:
            attempt = (value or {}).get("attempt", attempt + 1)
            chart.attempts.append((attempt, at))
        elif kind == EventType.ATTEMPT_ENDED:
            for bar in open_bars.values():
                bar.end, bar.outcome = at, "interrupted"
            open_bars.clear()
        elif kind == EventType.TASK_STARTED and event.get("task_id"):
            retry = (value or {}).get("attempt", 1) if isinstance(value, dict) else 1
            bar = Bar(event["task_id"], event.get("name") or event["task_id"], attempt, retry, at)
            open_bars[bar.task_id] = bar
            chart.bars.append(bar)
        elif kind in (EventType.TASK_COMPLETED, EventType.TASK_FAILED) and event.get("task_id") in open_bars:
            bar = open_bars.pop(event["task_id"])
            bar.end = at
            bar.outcome = "completed" if kind == EventType.TASK_COMPLETED else "failed"
            if kind == EventType.TASK_FAILED and isinstance(value, dict):
                bar.error = str(value.get("error") or "")[:500]
    return _laid_out(chart, now)


#: A member's bar by its state: one that ended as its state says, one holding a worker runs.
_MEMBER_OUTCOMES = {"COMPLETED": "completed", "FAILED": "failed", "TIMED_OUT": "failed", "CANCELLED": "interrupted"}


def members_gantt(members: list[dict[str, Any]], now: float) -> Gantt:
    """A gang's members on a time axis, one row per rank (docs/gangs.md): from each
    member's start to its end (or now). ``members``: its ``GET /executions/ID``'s. A member
    not started, or waiting for its gang's next placement (SCHEDULED), has no bar."""
    chart = Gantt()
    for m in members:
        if not m.get("started_at") or m["state"] == "SCHEDULED":
            continue
        outcome = _MEMBER_OUTCOMES.get(m["state"], "running")
        end = m.get("finished_at") if outcome != "running" else None
        label = f"rank {m['rank']}" + (f" on {m['worker_name']}" if m.get("worker_name") else "")
        chart.bars.append(Bar(m["id"], label, m.get("attempt") or 1, 1, m["started_at"], end, outcome))
    return _laid_out(chart, now)


def _laid_out(chart: Gantt, now: float) -> Gantt:
    """Each bar's offset and width as percentages of the chart's span."""
    if chart.bars:
        chart.start = min(bar.start for bar in chart.bars)
        chart.end = max(bar.end if bar.end is not None else now for bar in chart.bars)
        span = chart.span or 1.0
        for bar in chart.bars:
            end = bar.end if bar.end is not None else now
            bar.left = 100.0 * (bar.start - chart.start) / span
            bar.width = max(100.0 * (end - bar.start) / span, 0.5)
    return chart


@dataclass
class TaskFailure:
    """A failed try of a task call, with what it raised (the error panel's list)."""

    task_id: str
    attempt: int
    failure: Failure


def task_failures(events: list[dict[str, Any]]) -> list[TaskFailure]:
    """Each ``TASK_FAILED`` that carries a failure (an older worker's carry only ``error``)."""
    found = []
    for event in events:
        if event["type"] == EventType.TASK_FAILED and (failure := Failure.parsed(event.get("value"))) is not None:
            found.append(TaskFailure(event.get("task_id") or "", int(event["value"].get("attempt") or 1), failure))
    return found
