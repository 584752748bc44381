"""Prometheus metrics at ``GET /metrics``.

Fleet and queue gauges are read from the database at scrape time (finished executions
from the ``execution_counts`` rows that triggers keep, active ones from an index range) (the scrape's own
queries are not counted in ``flux_db_statements_total``); worker liveness comes
from this replica's registry. Claim latency, dispatch counts, heartbeats, status
writes, evictions, shed requests and the server's own lag are observed by this
process. ``flux_oldest_scheduled_age_seconds`` is the spec's "SCHEDULED-age alert":
alert when it exceeds what your workloads tolerate.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from typing import Callable, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from flux.domain.events import EventType, ExecutionState
from flux.domain.workers import Liveness, WorkerState
from flux.server import fleet, namespaces, usage
from flux.server.autoscale import store as pool_store
from flux.server.database import StatementCounter
from flux.server.executions import finishes, gang_waits
from flux.server.hook_models import HookDeliveryModel
from flux.server.models import ExecutionCountModel, ExecutionModel, WorkerModel

WORKER_STATES = tuple(WorkerState)
ACTIVE_STATES = [state.value for state in ExecutionState if not state.is_terminal]
#: The events ``flux_task_events`` counts.
COUNTED_EVENTS = frozenset(
    event.value
    for event in (
        EventType.TASK_FALLBACK,
        EventType.TASK_CACHE_HIT,
        EventType.TASK_CACHE_STORED,
        EventType.ROLLBACK_STARTED,
        EventType.ROLLBACK_COMPLETED,
        EventType.ROLLBACK_FAILED,
        EventType.VALUE_RECORDED,
    )
)


#: Seconds an execution may wait for a worker, and may run: from sub-second to a day.
QUEUE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400)


class Claimed(NamedTuple):
    """One placement of a dispatch round, for the metrics."""

    worker: str
    namespace: str
    workflow: str
    #: Seconds it waited in SCHEDULED.
    waited: float


class _Statements:
    """Exports a ``StatementCounter`` as one counter labelled by kind."""

    def __init__(self, counter: StatementCounter):
        self.counter = counter

    def collect(self):
        family = CounterMetricFamily("flux_db_statements", "SQL statements sent to the database", labels=["kind"])
        family.add_metric(["read"], self.counter.reads)
        family.add_metric(["write"], self.counter.writes)
        yield family


class _Lost:
    """``flux_preemption_lost_seconds_total``: the work preemptions threw away, by namespace,
    as the database counts it (every replica's, across restarts), read at each scrape."""

    def __init__(self) -> None:
        self.lost: dict[str, float] = {}

    def collect(self):
        family = CounterMetricFamily(
            "flux_preemption_lost_seconds",
            "Seconds of work preempted attempts threw away (since each one's last checkpoint), by namespace",
            labels=["namespace"],
        )
        for namespace, seconds in sorted(self.lost.items()):
            family.add_metric([namespace], seconds)
        yield family


class ServerMetrics:
    def __init__(self, statements: StatementCounter | None = None) -> None:
        self.registry = CollectorRegistry()
        if statements is not None:
            self.registry.register(_Statements(statements))
        self.lost = _Lost()
        self.registry.register(self.lost)
        self.heartbeats = Counter("flux_heartbeats", "Worker heartbeats answered", registry=self.registry)
        self.status_writes = Counter(
            "flux_worker_status_writes",
            "Heartbeats whose sample moved enough to be recorded (written in batches)",
            registry=self.registry,
        )
        self.evictions = Counter("flux_evictions", "Workers evicted for silence", registry=self.registry)
        self.shed = Counter(
            "flux_shed_requests", "Requests answered 503 because the server was overloaded", registry=self.registry
        )
        self.server_lag = Gauge(
            "flux_server_lag_seconds",
            "How far behind its own work the server was at the last tick",
            registry=self.registry,
        )
        self.waiting = Gauge(
            "flux_long_poll_waiters",
            "Long polls (claims, waits) waiting on this process right now",
            registry=self.registry,
        )
        self.workers = Gauge("flux_workers", "Registered workers by state", ["state"], registry=self.registry)
        self.executions = Gauge("flux_executions", "Executions by state", ["state"], registry=self.registry)
        self.pool_workers = Gauge(
            "flux_pool_workers",
            "Workers of each worker pool: desired (the last pass's decision), starting, running, idle, stopping",
            ["pool", "state"],
            registry=self.registry,
        )
        self.pool_failures = Gauge(
            "flux_pool_provider_failures",
            "A pool's provider failures in a row (0: the last call worked)",
            ["pool"],
            registry=self.registry,
        )
        self.oldest_scheduled = Gauge(
            "flux_oldest_scheduled_age_seconds",
            "Age of the oldest SCHEDULED execution (0 when none)",
            registry=self.registry,
        )
        self.claim_latency = Histogram(
            "flux_claim_latency_seconds",
            "Time from SCHEDULED to CLAIMED",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=self.registry,
        )
        self.dispatches = Counter(
            "flux_dispatches", "Executions dispatched, by worker", ["worker"], registry=self.registry
        )
        # contention (docs/contention.md)
        self.pending = Gauge(
            "flux_pending_executions",
            "SCHEDULED executions by namespace and priority",
            ["namespace", "priority"],
            registry=self.registry,
        )
        self.preemptions = Counter(
            "flux_preemptions",
            "Attempts preempted for a higher priority, by namespace of the victim",
            ["namespace"],
            registry=self.registry,
        )
        self.withdrawals = Counter(
            "flux_preemptions_withdrawn",
            "Preemptions called off in their grace period: their preemptor no longer needed the room",
            registry=self.registry,
        )
        self.quota_used = Gauge(
            "flux_quota_used",
            "What a namespace with a quota holds, by dimension (executions included)",
            ["namespace", "resource"],
            registry=self.registry,
        )
        self.quota_limit = Gauge(
            "flux_quota_limit", "A namespace's quota, by dimension", ["namespace", "resource"], registry=self.registry
        )
        # gangs (docs/gangs.md)
        self.gangs_waiting = Gauge(
            "flux_gangs_waiting",
            "Gangs in SCHEDULED (waiting to be placed whole), by namespace",
            ["namespace"],
            registry=self.registry,
        )
        self.gang_wait = Histogram(
            "flux_gang_wait_seconds",
            "From a gang's submission or requeue to the placement of all its members, by namespace and workflow",
            ["namespace", "workflow"],
            buckets=QUEUE_BUCKETS,
            registry=self.registry,
        )
        # per workflow and namespace (docs/production.md#dashboards): bounded by what is registered
        self.queue_wait = Histogram(
            "flux_execution_queue_wait_seconds",
            "From SCHEDULED (submission or a reschedule) to CLAIMED, by namespace and workflow",
            ["namespace", "workflow"],
            buckets=QUEUE_BUCKETS,
            registry=self.registry,
        )
        self.duration = Histogram(
            "flux_execution_duration_seconds",
            "From an execution's first start to its end, by namespace, workflow and how it ended (state)",
            ["namespace", "workflow", "state"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.rounds = Histogram(
            "flux_dispatch_round_seconds",
            "A placement round: its work in the database thread (part=work), the CPU time of that work "
            "(part=cpu: no wait for the GIL or the database) and from its start to its commit, "
            "queueing for the writer included (part=total)",
            ["part"],
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
            registry=self.registry,
        )
        # schedules (docs/schedules.md)
        self.schedule_fires = Counter(
            "flux_schedule_fires",
            "Executions started by schedules: how=due (the loop) or trigger (by hand)",
            ["how"],
            registry=self.registry,
        )
        self.schedule_skips = Counter(
            "flux_schedule_skips",
            "Due times that started nothing: reason=overlap, catch_up or workflow_missing",
            ["reason"],
            registry=self.registry,
        )
        self.schedule_lateness = Histogram(
            "flux_schedule_lateness_seconds",
            "From a schedule's due time to its execution's creation (jitter included)",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=self.registry,
        )
        self.cache_lookups = Counter(
            "flux_cache_lookups",
            "Task cache lookups by workers, by result (hit, miss)",
            ["result"],
            registry=self.registry,
        )
        self.task_events = Counter(
            "flux_task_events",
            "Fallbacks, cache hits and stores, rollbacks and recorded values workers reported, by event type",
            ["type"],
            registry=self.registry,
        )
        # webhooks (docs/hooks.md)
        self.hook_deliveries = Counter(
            "flux_hook_deliveries",
            "Webhook attempts by outcome (delivered, failed), and deliveries that died (dead)",
            ["outcome"],
            registry=self.registry,
        )
        self.hook_outbox_age = Gauge(
            "flux_hook_outbox_age_seconds",
            "Age of the oldest webhook delivery not yet delivered or dead (0 when none)",
            registry=self.registry,
        )

    def count_task_events(self, events: list) -> None:
        """Count the programming model's events of a checkpoint (docs/tasks.md)."""
        for event in events:
            if event.type in COUNTED_EVENTS:
                self.task_events.labels(type=event.type).inc()

    def observe_dispatch(self, claimed: Claimed) -> None:
        waited = max(claimed.waited, 0.0)
        self.dispatches.labels(worker=claimed.worker).inc()
        self.claim_latency.observe(waited)
        self.queue_wait.labels(namespace=claimed.namespace, workflow=claimed.workflow).observe(waited)

    def observe_finished(self, session: Session) -> None:
        """After a commit (``Database.after_commit``): the executions it finished, and the
        gangs it placed."""
        for placed in gang_waits.taken(session):
            self.gang_wait.labels(namespace=placed.namespace, workflow=placed.workflow).observe(placed.waited)
        for done in finishes.taken(session):
            if done.ran is not None:  # one cancelled while queued never ran
                self.duration.labels(namespace=done.namespace, workflow=done.workflow, state=done.state).observe(
                    max(done.ran, 0.0)
                )

    @staticmethod
    def snapshot(session: Session, liveness: Callable[[str], Liveness | None]) -> dict:
        counts = fleet.running_counts(session)
        rows = session.execute(select(WorkerModel.name, WorkerModel.state, WorkerModel.draining))
        workers = Tally(
            fleet.display_state(fleet.live_state(row.state, liveness(row.name)), row.draining, counts.get(row.name, 0))
            for row in rows
        )
        # finished ones from the trigger-kept counts, the rest from the state index: a
        # scrape costs what the queue holds, not what the history does (docs/history.md)
        executions = dict(session.execute(select(ExecutionCountModel.state, ExecutionCountModel.count)).all())
        executions.update(
            session.execute(
                select(ExecutionModel.state, func.count())
                .where(ExecutionModel.state.in_(ACTIVE_STATES))
                .group_by(ExecutionModel.state)
            ).all()
        )
        oldest = session.scalar(
            select(func.min(ExecutionModel.scheduled_at)).where(ExecutionModel.state == ExecutionState.SCHEDULED.value)
        )
        scheduled = ExecutionModel.state == ExecutionState.SCHEDULED.value
        pending = session.execute(  # what the queue holds: a gang once, not its members (docs/gangs.md)
            select(ExecutionModel.namespace, ExecutionModel.priority, func.count())
            .where(scheduled, ExecutionModel.gang_id.is_(None))
            .group_by(ExecutionModel.namespace, ExecutionModel.priority)
        ).all()
        gangs = session.execute(
            select(ExecutionModel.namespace, func.count())
            .where(scheduled, ExecutionModel.gang.is_not(None))
            .group_by(ExecutionModel.namespace)
        ).all()
        quotas = {
            name: (quota, namespaces.usage(session, name)["held"])
            for name, quota in namespaces.rules(session)[0].items()
        }
        oldest_hook = session.scalar(
            select(func.min(HookDeliveryModel.created_at)).where(HookDeliveryModel.state == "pending")
        )
        return {
            "workers": workers,
            "executions": executions,
            "oldest": oldest,
            "pending": pending,
            "gangs": gangs,
            "quotas": quotas,
            "oldest_hook": oldest_hook,
            "pools": pool_store.gauges(session),
            "lost": usage.lost_by_namespace(session),
        }

    def render(self, snapshot: dict) -> bytes:
        self.lost.lost = snapshot.get("lost", {})
        self.pending.clear()
        for namespace, priority, count in snapshot.get("pending", ()):
            self.pending.labels(namespace=namespace, priority=str(priority)).set(count)
        self.gangs_waiting.clear()
        for namespace, count in snapshot.get("gangs", ()):
            self.gangs_waiting.labels(namespace=namespace).set(count)
        for gauge in (self.quota_used, self.quota_limit):
            gauge.clear()
        for namespace, (quota, held) in snapshot.get("quotas", {}).items():
            for resource, limit in quota.to_json().items():
                self.quota_limit.labels(namespace=namespace, resource=resource).set(limit)
                self.quota_used.labels(namespace=namespace, resource=resource).set(held.get(resource, 0))
        for state in WORKER_STATES:
            self.workers.labels(state=state).set(snapshot["workers"].get(state, 0))
        for state in ExecutionState:
            self.executions.labels(state=state.value).set(snapshot["executions"].get(state.value, 0))
        oldest = snapshot["oldest"]
        self.oldest_scheduled.set(time.time() - oldest if oldest else 0.0)
        oldest_hook = snapshot.get("oldest_hook")
        self.hook_outbox_age.set(time.time() - oldest_hook if oldest_hook else 0.0)
        self.pool_workers.clear()  # a deleted pool's series go with it
        self.pool_failures.clear()
        for pool in snapshot["pools"]:
            for state, count in pool.workers.items():
                self.pool_workers.labels(pool=pool.name, state=state).set(count)
            self.pool_failures.labels(pool=pool.name).set(pool.failures)
        return generate_latest(self.registry)
