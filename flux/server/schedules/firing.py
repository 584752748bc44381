"""Firing due schedules: one transaction per batch, exactly one execution per due time.

A pass locks the schedules whose ``next_fire_at`` has come (``FOR UPDATE SKIP
LOCKED`` on PostgreSQL: replicas share the work and never wait on each other; SQLite
has one writer), and in the same transaction creates each execution through the
state machine (``executions.submit``, naming the schedule and the due time: unique
together) and advances ``next_due``. A crash before the commit leaves neither the
execution nor the advance; after it, both. So a due time fires once, whichever
replica gets there, however many crash (docs/schedules.md).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import exists, func, select, tuple_
from sqlalchemy.orm import Session

from flux.domain.events import ExecutionState
from flux.domain.hooks import HookEvent, HookEventType
from flux.domain.policy import ExecutionPolicy
from flux.domain.schedules import CatchUpPolicy, InvalidSchedule, OverlapPolicy, plan
from flux.server import executions, outbox
from flux.server.errors import Conflict, Invalid, NotFound
from flux.server.models import ExecutionModel, ScheduleModel
from flux.server.schedules.store import pause_broken, set_next, spec_of
from flux.server.schemas import RunRequest

log = logging.getLogger("flux.server.schedules")

#: Schedules fired per transaction: bounds how long one holds the SQLite writer.
BATCH = 500
#: Seconds of planning and firing per transaction: past it the pass commits what it
#: did and the loop runs another (the writer and the event loop are never held long).
BUDGET = 0.5
ACTIVE = [state.value for state in ExecutionState if not state.is_terminal]


@dataclass
class Pass:
    """What one pass did, for metrics and wake-ups."""

    lateness: list[float] = field(default_factory=list)  # due -> created, per fire
    skipped: Counter = field(default_factory=Counter)  # reason -> due times
    wake: list[str] = field(default_factory=list)  # workers holding a run cancel_previous cancelled
    cancelled: list[str] = field(default_factory=list)
    next_at: float | None = None  # the earliest next_fire_at of an active schedule
    queued: bool = False  # some due time waits for a run to end (overlap=queue_one)
    more: bool = False  # a batch was full: run another pass at once


def fire_due(session: Session, now: float, policy: ExecutionPolicy, batch: int = BATCH) -> Pass:
    # The schedule rows are written in one flush at the end, not one before each statement.
    with session.no_autoflush:
        done = _fire_batch(session, now, policy, batch)
    session.flush()
    done.next_at = session.scalar(select(func.min(ScheduleModel.next_fire_at)).where(ScheduleModel.paused.is_(False)))
    done.queued = bool(
        session.scalar(select(exists().where(ScheduleModel.queued_due.is_not(None), ScheduleModel.paused.is_(False))))
    )
    return done


def _fire_batch(session: Session, now: float, policy: ExecutionPolicy, batch: int) -> Pass:
    done = Pass()
    waiting = _locked(session, ScheduleModel.queued_due.is_not(None), ScheduleModel.queued_due, batch)
    active = _active_runs(session, waiting)
    for row in waiting:
        if not active.get((row.namespace, row.name)):
            due, row.queued_due = row.queued_due, None
            _fire(session, row, due, policy, done)
    due_rows = _locked(session, ScheduleModel.next_fire_at <= now, ScheduleModel.next_fire_at, batch)
    active = _active_runs(session, due_rows)
    deadline = time.monotonic() + BUDGET
    for row in due_rows:
        if time.monotonic() > deadline:
            done.more = True
            return done
        spec = spec_of(row)
        try:
            steps = plan(spec, row.next_due, now, CatchUpPolicy(row.catch_up), row.catch_up_limit)
        except (InvalidSchedule, OverflowError, ValueError) as exc:  # stored by an older version: never loop on it
            pause_broken(row, spec.problem() or str(exc))
            continue
        done.skipped["catch_up"] += steps.skipped
        if steps.skipped:
            _tell(session, row, HookEventType.SCHEDULE_MISSED, missed=steps.skipped, next_due=steps.next_due)
        for due in steps.fire:
            _fire_or_hold(session, row, due, active.setdefault((row.namespace, row.name), []), policy, done)
        set_next(row, steps.next_due)
    done.more = len(waiting) == batch or len(due_rows) == batch
    return done


def _locked(session: Session, due, order, batch: int) -> list[ScheduleModel]:  # noqa: ANN001 - SQL expressions
    query = select(ScheduleModel).where(ScheduleModel.paused.is_(False), due).order_by(order).limit(batch)
    return list(session.scalars(query.with_for_update(skip_locked=True)))


def _active_runs(session: Session, rows: list[ScheduleModel]) -> dict[tuple[str, str], list[str]]:
    """The non-terminal runs of each schedule (by namespace and name) that has an overlap policy to apply."""
    names = [(row.namespace, row.name) for row in rows if row.overlap != OverlapPolicy.ALLOW_ALL.value]
    runs: dict[tuple[str, str], list[str]] = {}
    if names:
        query = select(ExecutionModel.namespace, ExecutionModel.schedule, ExecutionModel.id).where(
            tuple_(ExecutionModel.namespace, ExecutionModel.schedule).in_(names), ExecutionModel.state.in_(ACTIVE)
        )
        for namespace, name, execution_id in session.execute(query):
            runs.setdefault((namespace, name), []).append(execution_id)
    return runs


def _fire_or_hold(
    session: Session, row: ScheduleModel, due: float, active: list[str], policy: ExecutionPolicy, done: Pass
) -> None:
    """Apply the overlap policy to one due time while ``active`` runs are not over."""
    overlap = OverlapPolicy(row.overlap)
    if active and overlap is OverlapPolicy.SKIP:
        _skip(session, row, due, "overlap", done)
        return
    if active and overlap is OverlapPolicy.QUEUE_ONE:
        if row.queued_due is None:
            row.queued_due = due
        else:
            _skip(session, row, due, "overlap", done)
        return
    if active and overlap is OverlapPolicy.CANCEL_PREVIOUS:
        for execution_id in active:
            cancelled, worker = executions.cancel(session, execution_id)
            done.cancelled.append(cancelled.id)
            if worker:
                done.wake.append(worker)
        active.clear()
    execution_id = _fire(session, row, due, policy, done)
    if execution_id is not None and overlap is not OverlapPolicy.ALLOW_ALL:
        active.append(execution_id)


def _fire(session: Session, row: ScheduleModel, due: float, policy: ExecutionPolicy, done: Pass) -> str | None:
    """A run of the schedule's workflow, in the schedule's namespace."""
    run = RunRequest(input=row.input, version=row.workflow_version, priority=row.priority)
    try:
        execution = executions.submit(
            session, row.namespace, row.workflow_name, run, policy, schedule=row.name, scheduled_for=due
        )
    except NotFound as exc:  # the pinned version is gone: this due time cannot run
        log.warning("schedule %s skipped its run due at %s: %s", row.name, due, exc)
        _skip(session, row, due, "workflow_missing", done)
        return None
    except Conflict:  # its namespace is being deleted (docs/namespaces.md)
        _skip(session, row, due, "namespace_terminating", done)
        return None
    except Invalid as exc:  # its priority class is gone, or its input no longer renders a concurrency key
        log.warning("schedule %s skipped its run due at %s: %s", row.name, due, exc)
        done.skipped["invalid_run"] += 1
        return None
    done.lateness.append(max(0.0, execution.scheduled_at - due))
    return execution.id


def _skip(session: Session, row: ScheduleModel, due: float, reason: str, done: Pass) -> None:
    """A due time that starts nothing: counted, and told to the hooks that want it."""
    done.skipped[reason] += 1
    _tell(session, row, HookEventType.SCHEDULE_SKIPPED, due=due, reason=reason)


def _tell(session: Session, row: ScheduleModel, type_: HookEventType, **data) -> None:  # noqa: ANN003 - the event's data
    """A schedule's event, in the transaction of the pass (docs/hooks.md)."""
    if outbox.wants(session, type_):
        event = HookEvent(
            type_,
            f"schedule:{row.name}",
            row.namespace,
            {"schedule": row.name, "workflow": row.workflow_name, **data},
            workflow=row.workflow_name,
        )
        outbox.enqueue(session, event)
