"""Preemptions on the server: recorded when a round decides them, withdrawn when no
room needs them any more, and ended by the server itself when a victim's worker did
not end them (docs/contention.md). The decisions are ``flux.scheduling``'s; quotas
and weights are ``namespaces``' rows."""

from __future__ import annotations

from typing import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.attempts import AttemptEnd
from flux.domain.events import HOLDING_STATES, EventType, ExecutionState
from flux.domain.hooks import HookEventType
from flux.domain.policy import ExecutionPolicy
from flux.scheduling.contention import Preemption
from flux.scheduling.holders import Holder
from flux.scheduling.preemption import withdrawals
from flux.server import outbox
from flux.server.eventlog import append_event
from flux.server.executions.lifecycle import end_attempt
from flux.server.models import ExecutionModel

#: Seconds past a preemption's deadline after which the server ends the attempt itself
#: (its worker ends it at the deadline; this covers a worker too old or too stuck to).
PREEMPTION_SLACK = 5.0


def preempt(session: Session, preemptions: list[Preemption], grace: float, now: float) -> list[ExecutionModel]:
    """Record the round's preemptions: each victim's notice (PREEMPTED, its deadline)
    and the preemptor's PREEMPTED naming them. Returns the victims (their workers' claims carry
    the notice)."""
    noticed: list[ExecutionModel] = []
    deadline = now + grace
    for preemption in preemptions:
        victims = session.scalars(
            select(ExecutionModel).where(
                ExecutionModel.id.in_(preemption.victims),
                ExecutionModel.state.in_(HOLDING_STATES),
                ExecutionModel.preempt_deadline.is_(None),
            )
        ).all()
        if not victims:
            continue
        for victim in victims:
            victim.preempted_by, victim.preempt_deadline = preemption.preemptor, deadline
            value = {"by": preemption.preemptor, "worker": preemption.worker, "grace": grace, "deadline": deadline}
            append_event(
                session,
                victim,
                EventType.PREEMPTED,
                name=victim.workflow_name,
                value=value,
                at=now,
                worker_name=victim.worker_name,
            )
            outbox.execution_event(session, victim, HookEventType.EXECUTION_PREEMPTED, **value)
            noticed.append(victim)
        preemptor = session.get(ExecutionModel, preemption.preemptor)
        value = {"worker": preemption.worker, "victims": [v.id for v in victims], "deadline": deadline}
        append_event(session, preemptor, EventType.PREEMPTED, name=preemptor.workflow_name, value=value, at=now)
    return noticed


def expire_preemptions(session: Session, now: float, policy: ExecutionPolicy) -> list[str]:
    """End the attempts of victims whose worker did not end them by the deadline (plus
    ``PREEMPTION_SLACK``): back to the queue, uncounted. Returns their former workers."""
    overdue = session.scalars(
        select(ExecutionModel)
        .where(ExecutionModel.preempt_deadline < now - PREEMPTION_SLACK, ExecutionModel.state.in_(HOLDING_STATES))
        .with_for_update(skip_locked=True)
    ).all()
    workers = []
    for execution in overdue:
        workers.append(execution.worker_name)
        end_attempt(session, execution, AttemptEnd.PREEMPTED, f"preempted by {execution.preempted_by}", policy)
    return workers


def victims(session: Session) -> list[Holder]:
    """The executions whose preemption's grace period runs (as ``withdraw`` reads them), when
    no round read who holds what: an empty queue's."""
    rows = session.execute(
        select(ExecutionModel.id, ExecutionModel.worker_name, ExecutionModel.preempted_by).where(
            ExecutionModel.preempted_by.is_not(None), ExecutionModel.state.in_(HOLDING_STATES)
        )
    )
    return [Holder(row.id, row.worker_name or "", leaving=True, preempted_by=row.preempted_by) for row in rows]


def withdraw(
    session: Session,
    holders: Collection[Holder],
    needed: Collection[str],
    sought: Collection[str],
    placed: Collection[str],
    now: float,
) -> list[str]:
    """Call off the preemptions no room needs any more (``preemption.withdrawals``): the
    victim's log records PREEMPTION_WITHDRAWN and its attempt goes on. ``placed``: what
    the round placed (a preemptor placed elsewhere no longer waits). Returns the
    victims' workers (their claims carry the withdrawal)."""
    preempting = [h for h in holders if h.preempted_by is not None]
    if not preempting:
        return []
    preemptors = {h.preempted_by for h in preempting}
    queued = session.scalars(
        select(ExecutionModel.id).where(
            ExecutionModel.id.in_(preemptors), ExecutionModel.state == ExecutionState.SCHEDULED.value
        )
    )
    called_off = withdrawals(preempting, needed, sought, set(queued) - set(placed))
    if not called_off:
        return []
    by = {h.execution_id: h.preempted_by for h in called_off}
    rows = session.scalars(
        select(ExecutionModel).where(
            ExecutionModel.id.in_(by), ExecutionModel.state.in_(HOLDING_STATES), ExecutionModel.preempt_deadline > now
        )
    ).all()
    workers = []
    for victim in rows:
        if victim.preempted_by != by[victim.id]:
            continue  # preempted again meanwhile, for another
        preemptor = session.get(ExecutionModel, victim.preempted_by)
        value = {"by": victim.preempted_by, "worker": victim.worker_name, "reason": _reason(preemptor, placed)}
        victim.preempted_by = victim.preempt_deadline = None
        append_event(
            session,
            victim,
            EventType.PREEMPTION_WITHDRAWN,
            name=victim.workflow_name,
            value=value,
            at=now,
            worker_name=victim.worker_name,
        )
        workers.append(victim.worker_name)
    return workers


def _reason(preemptor: ExecutionModel | None, placed: Collection[str]) -> str:
    """Why the preemptor no longer needs the room, in words for the victim's log."""
    if preemptor is None:
        return "its preemptor is gone"
    if preemptor.id in placed:
        return "its preemptor was placed on another worker"
    if preemptor.state != ExecutionState.SCHEDULED.value:
        return f"its preemptor is {preemptor.state.lower()}"
    return "its preemptor's room is no longer needed here"
