"""Prometheus metrics at ``GET /metrics``.

Fleet and queue gauges are read from the database at scrape time, so every replica
reports the same truth; claim latency and dispatch counts are observed by this
replica's dispatcher as it places work. ``flux_oldest_scheduled_age_seconds`` is the
spec's "SCHEDULED-age alert": alert when it exceeds what your workloads tolerate.
"""

from __future__ import annotations

import time
from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from flux.domain.events import ExecutionState
from flux.models import ExecutionModel, WorkerModel
from flux.server import fleet

WORKER_STATES = (fleet.ONLINE, fleet.STALE, fleet.OFFLINE, fleet.DRAINING, fleet.DRAINED)


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.workers = Gauge("flux_workers", "Registered workers by state", ["state"], registry=self.registry)
        self.executions = Gauge("flux_executions", "Executions by state", ["state"], registry=self.registry)
        self.oldest_scheduled = Gauge(
            "flux_oldest_scheduled_age_seconds", "Age of the oldest SCHEDULED execution (0 when none)", registry=self.registry
        )
        self.claim_latency = Histogram(
            "flux_claim_latency_seconds",
            "Time from SCHEDULED to CLAIMED",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=self.registry,
        )
        self.dispatches = Counter("flux_dispatches", "Executions dispatched, by worker", ["worker"], registry=self.registry)

    def observe_dispatch(self, worker_name: str, waited: float) -> None:
        self.dispatches.labels(worker=worker_name).inc()
        self.claim_latency.observe(max(waited, 0.0))

    @staticmethod
    def snapshot(session: Session) -> dict:
        counts = fleet.running_counts(session)
        workers = Tally(fleet.display_state(w, counts.get(w.name, 0)) for w in session.scalars(select(WorkerModel)))
        executions = dict(session.execute(select(ExecutionModel.state, func.count()).group_by(ExecutionModel.state)).all())
        oldest = session.scalar(
            select(func.min(ExecutionModel.scheduled_at)).where(ExecutionModel.state == ExecutionState.SCHEDULED.value)
        )
        return {"workers": workers, "executions": executions, "oldest": oldest}

    def render(self, snapshot: dict) -> bytes:
        for state in WORKER_STATES:
            self.workers.labels(state=state).set(snapshot["workers"].get(state, 0))
        for state in ExecutionState:
            self.executions.labels(state=state.value).set(snapshot["executions"].get(state.value, 0))
        oldest = snapshot["oldest"]
        self.oldest_scheduled.set(time.time() - oldest if oldest else 0.0)
        return generate_latest(self.registry)
