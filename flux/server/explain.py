"""Explanations: ``GET /executions/{id}/placement`` (why an execution waits, or why its
worker won, and how many attempts it used and why each ended), and the notes each
dispatch round leaves on what still waits (WORKFLOW_PENDING, WORKFLOW_UNSCHEDULABLE)."""

from __future__ import annotations

import json
import time
from typing import Mapping

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from flux.domain.events import WAITING_STATES, EventType, ExecutionState
from flux.scheduling.binding import explain, led, no_pool
from flux.scheduling.demand import demand_from_row
from flux.scheduling.explain import infeasibility, summarize, verdict
from flux.scheduling.filters import Reason
from flux.scheduling.snapshot import WorkerView
from flux.server import executions, explain_gangs, outbox
from flux.server.autoscale import notes
from flux.server.eventlog import append_event
from flux.server.models import ExecutionEventModel, ExecutionModel, NamespaceModel
from flux.server.namespaces import usage
from flux.server.schemas import AttemptInfo, PlacementInfo, QueueInfo, WorkerPlacement


def _last(session: Session, execution_id: str, type_: EventType) -> dict | None:
    """The value of the execution's latest event of ``type_``."""
    return session.scalar(
        select(ExecutionEventModel.value)
        .where(ExecutionEventModel.execution_id == execution_id, ExecutionEventModel.type == type_.value)
        .order_by(ExecutionEventModel.seq.desc())
        .limit(1)
    )


def attempts_of(session: Session, execution_id: str) -> list[AttemptInfo]:
    """Each attempt from the log: where it ran and how it ended (open: still running)."""
    rows = session.execute(
        select(ExecutionEventModel.type, ExecutionEventModel.value, ExecutionEventModel.time)
        .where(
            ExecutionEventModel.execution_id == execution_id,
            ExecutionEventModel.type.in_([EventType.ATTEMPT_STARTED.value, EventType.ATTEMPT_ENDED.value]),
        )
        .order_by(ExecutionEventModel.seq)
    )
    found: dict[int, AttemptInfo] = {}
    for type_, value, at in rows:
        number = value["attempt"]
        if type_ == EventType.ATTEMPT_STARTED.value:
            found[number] = AttemptInfo(attempt=number, worker=value.get("worker"), started_at=at)
        elif number in found:
            found[number] = found[number].model_copy(
                update=dict(
                    ended_at=at, end=value.get("end"), cause=value.get("cause"), counted=bool(value.get("counted"))
                )
            )
    return list(found.values())


def placement(
    session: Session, execution_id: str, workers: list[WorkerView], namespace: str | None = None
) -> PlacementInfo:
    execution = executions.get_row(session, execution_id, namespace)
    demand = demand_from_row(
        execution_id=execution.id,
        requests=execution.requests,
        affinity=execution.affinity,
        namespace=execution.namespace,
    )
    verdicts = [verdict(demand.request, demand.affinity, worker, demand.namespace) for worker in workers]
    states = {worker.name: worker.shown_state for worker in workers}  # DRAINED as `flux worker list` says
    chosen = binding = short = claimed = None
    is_gang = execution.gang is not None
    if execution.state == ExecutionState.SCHEDULED.value and execution.gang_id is not None:
        summary = explain_gangs.member(execution)  # never placed alone: its gang's explain says why
    elif execution.state == ExecutionState.SCHEDULED.value:
        holds = [_held(session, execution)]  # what the last round said holds it: a quota, a key, room
        if is_gang:  # its shortfall domain by domain, from the fleet as it is now
            short = explain_gangs.shortfall(execution, demand, workers)
            holds = explain_gangs.holds(holds[0], short)
        if infeasibility(demand.request, demand.affinity, workers, demand.namespace):
            holds.append(no_pool(notes.templates(session), demand))
        explained = explain(verdicts, holds)
        starting = (  # worker pools (docs/autoscaling.md): a gang is asked of one pool, whole
            explain_gangs.pools_note(session, execution, demand, workers)
            if is_gang
            else notes.starting_for(session, demand)
        )
        summary, binding = explained.summary, explained.binding
        summary = f"{summary.rstrip('.')}; {starting}." if starting else summary
    elif execution.state in WAITING_STATES:  # on the server, not on a worker (docs/waits.md)
        summary = f"{execution.state}: {execution.placement_note}"
    elif is_gang:  # placed: its members hold the workers (docs/gangs.md)
        claimed = _last(session, execution_id, EventType.WORKFLOW_CLAIMED)
        summary = explain_gangs.placed(execution, claimed)
    else:
        chosen = _last(session, execution_id, EventType.WORKFLOW_CLAIMED)
        summary = (
            f"dispatched to {chosen['worker']}: {chosen['reason']}" if chosen else f"{execution.state} without dispatch"
        )
    return PlacementInfo(
        execution_id=execution.id,
        state=execution.state,
        summary=summary,
        binding=binding,
        unschedulable=execution.unschedulable,
        workers=[
            WorkerPlacement(name=v.worker, state=states[v.worker], available=v.available, reason=v.message)
            for v in verdicts
        ],
        chosen=chosen,
        attempt=execution.attempt,
        max_attempts=execution.max_attempts,
        crashes=execution.crashes,
        attempts=attempts_of(session, execution_id),
        queue=queue_of(session, execution),
        gang=explain_gangs.explanation(session, execution, short, claimed) if is_gang else None,
    )


def queue_of(session: Session, execution: ExecutionModel) -> QueueInfo:
    """Its priority, its place in its namespace's queue, the namespace's quota and use."""
    # what the queue holds: a gang once, not its members (never queued alone; docs/gangs.md)
    waiting = (ExecutionModel.state == ExecutionState.SCHEDULED.value) & ExecutionModel.gang_id.is_(None)
    position = None
    if execution.state == ExecutionState.SCHEDULED.value and execution.gang_id is None:
        ahead = (ExecutionModel.priority > execution.priority) | (
            (ExecutionModel.priority == execution.priority) & (ExecutionModel.scheduled_at < execution.scheduled_at)
        )
        position = 1 + session.scalar(
            select(func.count()).where(waiting, ExecutionModel.namespace == execution.namespace, ahead)
        )
    higher = session.scalar(select(func.count()).where(waiting, ExecutionModel.priority > execution.priority))
    namespace = session.get(NamespaceModel, execution.namespace)
    return QueueInfo(
        priority=execution.priority,
        priority_class=execution.priority_class,
        position=position,
        higher_waiting=higher,
        quota=namespace.quota if namespace is not None else None,
        held=usage(session, execution.namespace)["held"],
        note=execution.placement_note if execution.state == ExecutionState.SCHEDULED.value else None,
        preempted_by=execution.preempted_by,
        preempt_deadline=execution.preempt_deadline,
        preempting=dict(
            session.execute(
                select(ExecutionModel.id, ExecutionModel.preempt_deadline).where(
                    ExecutionModel.preempted_by == execution.id
                )
            ).all()
        ),
    )


def record_waiting(
    session: Session,
    page: list,
    placed: set[str],
    workers: list[WorkerView],
    held_back: Mapping[str, Reason] | None = None,
) -> None:
    """Note on each still-waiting execution why, when the reason is new or has changed.

    Explanations are computed once per distinct set of constraints, against the
    fleet as this round left it; ``held_back``: what contention said of some
    (a quota, a concurrency key, a higher priority's room, its own preemption), first.
    """
    explained: dict[tuple, tuple[str, bool, str | None, Reason | None]] = {}
    unschedulable: dict[str, str] = {}  # what is still, after this round: the hook's threshold
    now = time.time()
    templates = None  # the pools', read only when something fits no worker
    for row in page:
        if row.id in placed:
            continue
        key = (json.dumps(row.requests, sort_keys=True), json.dumps(row.affinity, sort_keys=True), row.namespace)
        if key not in explained:
            demand = demand_from_row(
                execution_id=row.id, requests=row.requests, affinity=row.affinity, namespace=row.namespace
            )
            verdicts = [verdict(demand.request, demand.affinity, w, demand.namespace) for w in workers]
            infeasible = infeasibility(demand.request, demand.affinity, workers, demand.namespace)
            if infeasible and templates is None:
                templates = notes.templates(session)
            unfit = no_pool(templates, demand) if infeasible else None
            infeasible = notes.unplaceable(infeasible, templates or [], unfit)
            explained[key] = (summarize(verdicts), any(v.available for v in verdicts), infeasible, unfit)
        tally, available, infeasible, unfit = explained[key]
        reason = (held_back or {}).get(row.id)
        summary = led(tally, available, (reason, unfit)).summary
        if infeasible:
            unschedulable[row.id] = infeasible
        if (summary, infeasible) == (row.placement_note, row.unschedulable):
            continue
        execution = session.get(ExecutionModel, row.id)
        if infeasible and infeasible != execution.unschedulable:
            since = (
                _unschedulable_since(session, execution.id) if execution.unschedulable else now
            )  # a new reason: the same wait
            append_event(
                session,
                execution,
                EventType.WORKFLOW_UNSCHEDULABLE,
                name=execution.workflow_name,
                value={"reason": infeasible, "since": since},
            )
        if summary != execution.placement_note:
            value = {"summary": summary} if reason is None else {"summary": summary, "held": reason._asdict()}
            append_event(session, execution, EventType.WORKFLOW_PENDING, name=execution.workflow_name, value=value)
        execution.placement_note, execution.unschedulable = summary, infeasible
    outbox.unschedulable_overdue(session, unschedulable, now)


def _held(session: Session, execution: ExecutionModel) -> Reason | None:
    """What the last round said holds it before any worker is looked at (its latest
    WORKFLOW_PENDING's ``held``: a quota, a concurrency key, room), or None; only while
    that event is its current note (not one of a wait before an earlier attempt)."""
    value = _last(session, execution.id, EventType.WORKFLOW_PENDING) or {}
    held = value.get("held") if value.get("summary") == execution.placement_note else None
    return Reason(**held) if isinstance(held, dict) and held.keys() == set(Reason._fields) else None


def _unschedulable_since(session: Session, execution_id: str) -> float:
    """When it became unschedulable: its latest WORKFLOW_UNSCHEDULABLE's ``since`` (or time)."""
    latest = session.execute(
        select(ExecutionEventModel.value, ExecutionEventModel.time)
        .where(
            ExecutionEventModel.execution_id == execution_id,
            ExecutionEventModel.type == EventType.WORKFLOW_UNSCHEDULABLE.value,
        )
        .order_by(ExecutionEventModel.seq.desc())
        .limit(1)
    ).first()
    return time.time() if latest is None else (latest.value or {}).get("since", latest.time)
