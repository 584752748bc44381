"""Schedules in the database: create, read, update, pause, resume, delete, and the
hand-made trigger (functions of a Session, run by ``Database.run``).

Every change of timing recomputes the next due time from now: a schedule never
catches up on what it missed while it was paused or before it was changed. Rows are
read ``FOR UPDATE`` (PostgreSQL), so a change waits for a fire in progress on another
replica instead of racing it.
"""

from __future__ import annotations

import logging
import time
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.fluxcore_schedules import DeclaredSchedule
from flux.domain.policy import ExecutionPolicy
from flux.domain.schedules import InvalidSchedule, Schedule, iso, jitter_offset
from flux.server import executions, workflows
from flux.server.errors import Conflict, Invalid, NotFound
from flux.server.models import ScheduleModel
from flux.server.namespaces import require_active
from flux.server.schedules.schemas import ScheduleCreate, ScheduleInfo, ScheduleUpdate
from flux.server.schemas import ExecutionInfo, RunRequest

log = logging.getLogger("flux.server.schedules")

#: Due times ``GET /schedules`` shows for each.
SHOWN = 5


def spec_of(row: ScheduleModel) -> Schedule:
    return Schedule(cron=row.cron, every=row.every, at=row.at, anchor=row.anchor, timezone=row.timezone)


def set_next(row: ScheduleModel, due: float | None) -> None:
    """The next due time, and when the loop fires it (its jitter added)."""
    row.next_due = due
    row.next_fire_at = None if due is None else due + jitter_offset(row.name, due, row.jitter)


def pause_broken(row: ScheduleModel, reason: str) -> None:
    """Pause a schedule whose timing lies outside what the API accepts (stored by an
    older version): it might never advance. The reason shows in ``GET /schedules/NAME``."""
    log.warning("schedule %s paused: %s", row.name, reason)
    row.paused, row.paused_reason, row.queued_due, row.updated_at = True, reason, None, time.time()


def pause_all_broken(session: Session) -> int:
    """At start: pause every active schedule outside the accepted domain; how many."""
    paused = 0
    for row in session.scalars(select(ScheduleModel).where(ScheduleModel.paused.is_(False)).with_for_update()):
        reason = spec_of(row).problem()
        if reason:
            pause_broken(row, reason)
            paused += 1
    return paused


def _shown(epoch: float, zone: ZoneInfo) -> str:
    """ISO 8601 in ``zone``; a stored time no date can show stays a number."""
    try:
        return iso(epoch, zone)
    except (OverflowError, ValueError, OSError):
        return repr(epoch)


def info(row: ScheduleModel) -> ScheduleInfo:
    spec = spec_of(row)
    try:
        zone = spec.zone
    except (ValueError, KeyError):  # an unknown zone stored by an older version (paused at start)
        zone = ZoneInfo("UTC")
    upcoming = []
    if not row.paused and row.next_due is not None and spec.problem() is None:
        upcoming = [row.next_due, *spec.upcoming(row.next_due, SHOWN - 1)]
    return ScheduleInfo(
        name=row.name,
        workflow=row.workflow_name,
        version=row.workflow_version,
        kind=spec.kind,
        cron=row.cron,
        every=row.every,
        at=_shown(row.at, zone) if row.at is not None else None,
        anchor=_shown(row.anchor, zone) if row.every is not None else None,
        timezone=row.timezone,
        input=row.input,
        overlap=row.overlap,
        catch_up=row.catch_up,
        catch_up_limit=row.catch_up_limit,
        jitter=row.jitter,
        paused=row.paused,
        priority=row.priority,
        paused_reason=row.paused_reason,
        next_fire_times=[_shown(due, zone) for due in upcoming],
        queued_for=_shown(row.queued_due, zone) if row.queued_due is not None else None,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _named(namespace: str, name: str):  # noqa: ANN202 - a WHERE clause
    return (ScheduleModel.namespace == namespace) & (ScheduleModel.name == name)


def get_row(session: Session, namespace: str, name: str) -> ScheduleModel:
    row = session.scalars(select(ScheduleModel).where(_named(namespace, name)).with_for_update()).first()
    if row is None:
        raise NotFound(f"schedule {name!r} not found")
    return row


def get(session: Session, namespace: str, name: str) -> ScheduleInfo:
    return info(get_row(session, namespace, name))


def list_all(session: Session, namespace: str) -> list[ScheduleInfo]:
    query = select(ScheduleModel).where(ScheduleModel.namespace == namespace).order_by(ScheduleModel.name)
    return [info(row) for row in session.scalars(query)]


def _check_workflow(session: Session, namespace: str, name: str, version: int | None) -> None:
    """An unknown workflow is a bad schedule (422), not a missing resource; a namespace
    being deleted takes no new schedule (409)."""
    try:
        workflows.header(session, namespace, name, version)
    except NotFound as exc:
        raise Invalid(f"workflow: {exc}") from None


def _parse(**timing) -> Schedule:
    try:
        return Schedule.parse(**timing)
    except InvalidSchedule as exc:
        raise Invalid(str(exc)) from None


def _first_due(row: ScheduleModel, now: float) -> float | None:
    spec = spec_of(row)
    if spec.at is not None and spec.at <= now:
        raise Invalid(f"at: {iso(spec.at, spec.zone)} is in the past")
    return spec.after(now)


def create(session: Session, namespace: str, body: ScheduleCreate) -> ScheduleInfo:
    """A schedule of ``namespace``, which fires its executions there."""
    require_active(session, namespace)
    if session.scalar(select(ScheduleModel.id).where(_named(namespace, body.name))) is not None:
        raise Conflict(f"schedule {body.name!r} already exists (PATCH /schedules/{body.name} changes it)")
    _check_workflow(session, namespace, body.workflow, body.version)
    spec = _parse(cron=body.cron, every=body.every, at=body.at, anchor=body.anchor, timezone=body.timezone)
    now = time.time()
    row = ScheduleModel(
        namespace=namespace,
        name=body.name,
        workflow_name=body.workflow,
        workflow_version=body.version,
        cron=spec.cron,
        every=spec.every,
        at=spec.at,
        anchor=spec.anchor,
        timezone=spec.timezone,
        input=body.input,
        overlap=body.overlap,
        catch_up=body.catch_up,
        catch_up_limit=body.catch_up_limit or 100,
        jitter=body.jitter or 0.0,
        paused=body.paused,
        queued_due=None,
        created_at=now,
        updated_at=now,
        priority=body.priority,
    )
    set_next(row, _first_due(row, now))
    session.add(row)
    session.flush()
    return info(row)


#: Fields that change when the next due time falls.
TIMING = {"cron", "every", "at", "anchor", "timezone", "jitter"}


def update(session: Session, namespace: str, name: str, body: ScheduleUpdate) -> ScheduleInfo:
    row = get_row(session, namespace, name)
    given = {
        field for field in body.model_fields_set if getattr(body, field) is not None or field in ("version", "input")
    }
    if "workflow" in given or "version" in given:
        row.workflow_name = body.workflow if "workflow" in given else row.workflow_name
        row.workflow_version = body.version if "version" in given else row.workflow_version
        _check_workflow(session, namespace, row.workflow_name, row.workflow_version)
    if given & TIMING:
        kind = next((k for k in ("cron", "every", "at") if k in given), None)
        timing = {k: getattr(row, k) for k in ("cron", "every", "at")} if kind is None else {kind: getattr(body, kind)}
        if "every" in timing and timing["every"] is not None:
            timing["anchor"] = body.anchor if "anchor" in given else row.anchor
        spec = _parse(**timing, timezone=body.timezone if "timezone" in given else row.timezone)
        row.cron, row.every, row.at, row.anchor, row.timezone = (
            spec.cron,
            spec.every,
            spec.at,
            spec.anchor,
            spec.timezone,
        )
        row.jitter = body.jitter if "jitter" in given else row.jitter
        set_next(row, _first_due(row, time.time()))
    for field in ("input", "overlap", "catch_up", "catch_up_limit", "priority"):
        if field in given:
            setattr(row, field, getattr(body, field))
    row.updated_at = time.time()
    return info(row)


def delete(session: Session, namespace: str, name: str) -> None:
    """Its executions stay, still naming it."""
    session.delete(get_row(session, namespace, name))


def pause(session: Session, namespace: str, name: str) -> ScheduleInfo:
    row = get_row(session, namespace, name)
    row.paused, row.paused_reason, row.queued_due, row.updated_at = True, None, None, time.time()
    return info(row)


def resume(session: Session, namespace: str, name: str) -> ScheduleInfo:
    """Due times passed while paused are not caught up: the next one is after now. A
    schedule outside the accepted domain stays paused (422) until its timing is changed."""
    row = get_row(session, namespace, name)
    if row.paused:
        spec = spec_of(row)
        reason = spec.problem()
        if reason:
            raise Invalid(f"schedule {name!r} cannot resume: {reason} (change its timing first)")
        now = time.time()
        row.paused, row.paused_reason, row.updated_at = False, None, now
        set_next(row, spec.after(now) if spec.at is None or row.next_due is not None else None)
    return info(row)


def trigger(session: Session, namespace: str, name: str, policy: ExecutionPolicy) -> ExecutionInfo:
    """Run it now, by hand: whatever its overlap policy or pause, like ``flux workflow
    run`` but recorded as the schedule's, due now."""
    row = get_row(session, namespace, name)
    run = RunRequest(input=row.input, version=row.workflow_version, priority=row.priority)
    return executions.submit(
        session, namespace, row.workflow_name, run, policy, schedule=row.name, scheduled_for=time.time()
    )


def declare(session: Session, namespace: str, workflow: str, declared: dict) -> ScheduleInfo:
    """The schedule a workflow declares in code (flux-core's ``schedule=cron(...)``), kept as
    the server schedule named after the workflow: created at its first registration,
    changed when the code's timing changes, left alone (paused or not) otherwise."""
    row = session.scalar(select(ScheduleModel).where(_named(namespace, workflow)))
    if row is None:
        return create(session, namespace, ScheduleCreate(name=workflow, workflow=workflow, **declared))
    wanted = DeclaredSchedule.from_request(declared)
    if spec_of(row) == wanted.schedule and row.overlap == wanted.overlap.value:
        return info(row)
    return update(session, namespace, workflow, ScheduleUpdate(**declared))
