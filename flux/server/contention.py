"""Preemptions on the server: recorded when a round decides them, and ended by the
server itself when a victim's worker did not end them (docs/contention.md). The
decisions are ``flux.scheduling``'s; quotas and weights are ``namespaces``' rows."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.attempts import AttemptEnd
from flux.domain.events import HOLDING_STATES, EventType
from flux.domain.hooks import HookEventType
from flux.domain.policy import ExecutionPolicy
from flux.scheduling.contention import Preemption
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
