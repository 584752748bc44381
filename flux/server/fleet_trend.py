"""The fleet over time: its summary sampled every ``PERIOD`` seconds and kept in memory
for ``KEEP`` samples (4 hours), for the console's fleet charts (``GET /fleet/history``).

Decided: in memory, per replica, not in the database. A point is ~200 bytes, so the
whole trend is ~200 KB and costs one summary read each 15 s (the page's own read);
a restart starts it empty, and each replica keeps its own (they read the same
database, so they draw the same lines). Longer history is Prometheus's job
(``flux_workers``, ``flux_executions``, the dashboard in ``deploy/grafana/``).
"""

from __future__ import annotations

import time
from collections import deque

from pydantic import BaseModel, Field

#: Seconds between samples, and samples kept (4 hours).
PERIOD = 15.0
KEEP = 960


class FleetSummary(BaseModel):
    """The fleet and its queue, across namespaces (reading it is ``read_fleet``)."""

    workers: dict[str, int] = Field(description="Workers by state: ONLINE, DRAINING, DRAINED, OFFLINE")
    slots: int = Field(description="Execution slots of the live workers")
    busy: int = Field(description="Of those, slots running an execution")
    queued: int = Field(description="Executions waiting for a worker (SCHEDULED)")
    unschedulable: int = Field(description="Of those, the ones no registered worker could ever take")
    waiting: int = Field(description="Executions waiting on the server: SLEEPING, PAUSED, AWAITING_CHILD")
    running: int = Field(description="Executions a worker holds: CLAIMED, RUNNING, CANCELLING")
    oldest_queued_at: float | None = Field(description="When the longest-queued execution was scheduled")
    cpu_percent: float = Field(
        default=0.0, description="How busy the live workers' cores are, from their last samples, weighted by cores"
    )
    memory_used: float = Field(default=0.0, description="Bytes of memory in use on the live workers")
    memory_total: float = Field(default=0.0, description="Bytes of memory of the live workers")
    gpus: int = Field(default=0, description="GPUs of the live workers")
    gpu_percent: float = Field(default=0.0, description="How busy those GPUs are, on average (their utilisation)")
    resources: dict[str, list[float]] = Field(
        default={},
        description="Probed dimensions beyond cpu, memory and disk: name -> [in use, total] over the live workers",
    )


class FleetPoint(FleetSummary):
    time: float


class FleetHistory(BaseModel):
    period: float = Field(description="Seconds between points")
    points: list[FleetPoint] = Field(description="Oldest first; empty after a restart")


class FleetTrend:
    """The last ``KEEP`` samples of this replica."""

    def __init__(self, keep: int = KEEP):
        self.points: deque[FleetPoint] = deque(maxlen=keep)

    def add(self, summary: FleetSummary, at: float | None = None) -> None:
        self.points.append(FleetPoint(time=at or time.time(), **summary.model_dump()))

    def history(self) -> FleetHistory:
        return FleetHistory(period=PERIOD, points=list(self.points))
