"""The claim path as set-based statements (docs/latency.md).

A dispatch round claims everything it placed with ONE UPDATE statement (its rows as
one executemany: a single pipelined batch on PostgreSQL) and logs the claims with one
INSERT; an execution placed on a worker whose claim waits on this replica is marked
delivered in that same UPDATE, so a claimed and delivered execution costs one row
write, not two. A claim that reads the database marks what it delivers the same way.
Each row is written only at the ``row_version`` it was read at (``setbased``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import JSON, bindparam, select, true, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from flux import tracing
from flux.domain.allotment import Allotment
from flux.domain.attempts import AttemptEnd
from flux.domain.events import EventType, ExecutionState
from flux.domain.policy import ExecutionPolicy
from flux.server.errors import NotFound
from flux.server.eventlog import INSERT_EVENT, append_events, numbered
from flux.server.executions.lifecycle import end_attempt, finish, finished_event
from flux.server.executions.reads import held_by, job_for
from flux.server.executions.setbased import T as _T
from flux.server.executions.setbased import write_all
from flux.server.models import ExecutionModel
from flux.server.schemas import ClaimedExecution

S = ExecutionState

#: What a round reads of the rows it claims (no payloads, no ORM objects).
_CLAIMING = select(
    _T.c.id,
    _T.c.namespace,
    _T.c.workflow_name,
    _T.c.attempt,
    _T.c.last_seq,
    _T.c.row_version,
    _T.c.traceparent,
    _T.c.pending_since,
).where(_T.c.id.in_(bindparam("ids", expanding=True)))  # built once: its cache key too
#: The CLAIMED transition of many rows: executed with one parameter set per row.
_CLAIM = (
    update(_T)
    .where(_T.c.id == bindparam("b_id"), _T.c.row_version == bindparam("b_version"), _T.c.state == S.SCHEDULED.value)
    .values(
        state=S.CLAIMED.value,
        worker_name=bindparam("b_worker"),
        attempt=_T.c.attempt + 1,
        checkpoint_batch=0,
        log_batch=0,
        delivered=bindparam("b_delivered"),
        claimed_at=bindparam("b_now"),
        allotment=bindparam("b_allotment", type_=JSON(none_as_null=True)),
        ready_at=None,
        traceparent=bindparam("b_traceparent"),
        last_seq=_T.c.last_seq + 2,
        row_version=_T.c.row_version + 1,
    )
)
#: Delivered to its worker (a claim read it): one parameter set per row.
_DELIVERED = (
    update(_T)
    .where(_T.c.id == bindparam("b_id"), _T.c.row_version == bindparam("b_version"))
    .values(delivered=True, row_version=_T.c.row_version + 1)
)


def undeliver(session: Session, worker_name: str, ids: list[str]) -> None:
    """What a round handed to a poll that hung up before reading it is undelivered
    again: its worker's next claim gets it, and if the worker is gone, it is handed
    back unrun (not counted as a crash)."""
    if ids:
        session.execute(
            update(_T)
            .where(
                _T.c.id.in_(ids),
                _T.c.worker_name == worker_name,
                _T.c.state == S.CLAIMED.value,
                _T.c.delivered == true(),
            )
            .values(delivered=False, row_version=_T.c.row_version + 1)
        )


@dataclass(frozen=True)
class Claim:
    """One placement to claim."""

    execution_id: str
    worker_name: str
    allotment: Allotment
    reason: str
    #: Its worker's claim waits on this replica: the round hands the job over itself.
    delivered: bool


def claim_all(session: Session, claims: list[Claim], now: float) -> list[Row]:
    """The CLAIMED transition of every placement of a round: a new attempt on its
    worker, whose number is the fencing token, logged (WORKFLOW_CLAIMED, ATTEMPT_STARTED).
    Returns the rows as read before (namespace, workflow, how long they waited)."""
    if not claims:  # a round that placed only gangs
        return []
    rows = {r.id: r for r in session.execute(_CLAIMING, {"ids": [c.execution_id for c in claims]})}
    params, events = [], []
    for c in claims:
        row = rows[c.execution_id]
        attempt, shown = row.attempt + 1, c.allotment.to_json()
        params.append(
            dict(
                b_id=row.id,
                b_version=row.row_version,
                b_worker=c.worker_name,
                b_delivered=c.delivered,
                b_now=now,
                b_allotment=shown or None,
                b_traceparent=_traced(row, c, attempt),
            )
        )
        value = {"worker": c.worker_name, "attempt": attempt, "reason": c.reason, "allotment": shown}
        events += numbered(
            row.id,
            row.last_seq,
            [
                dict(
                    type=EventType.WORKFLOW_CLAIMED,
                    name=row.workflow_name,
                    value=value,
                    time=now,
                    worker_name=c.worker_name,
                ),
                dict(
                    type=EventType.ATTEMPT_STARTED,
                    name=row.workflow_name,
                    value={"attempt": attempt, "worker": c.worker_name},
                    time=now,
                    worker_name=c.worker_name,
                ),
            ],
        )
    write_all(session, _CLAIM, params)
    session.execute(INSERT_EVENT, events)
    return [rows[c.execution_id] for c in claims]


def _traced(row: Row, c: Claim, attempt: int) -> str | None:
    """The span the worker's claim hangs under (docs/tracing.md), or the row's as it was."""
    if not tracing.enabled():
        return row.traceparent
    attributes = {
        "flux.execution_id": row.id,
        "flux.workflow": row.workflow_name,
        "flux.worker": c.worker_name,
        "flux.attempt": attempt,
        "flux.reason": c.reason,
    }
    with tracing.span("flux.dispatch", attributes, parent=row.traceparent):
        return tracing.current_traceparent()


def deliver(
    session: Session, worker_name: str, delivered: frozenset[str] = frozenset()
) -> tuple[list[ClaimedExecution], list[str], list[ExecutionModel]]:
    """Hand over what dispatch assigned to this worker, and list what it must cancel;
    ``delivered``: ids its round already marked delivered (handed over here all the same).

    An execution that cannot be handed over (its workflow version is gone, its data
    cannot be serialized) fails alone with the reason; the claim and the rest go on.
    Also returns everything the worker now holds, for the fleet registry's cache.
    """
    held = held_by(session, worker_name)
    cancel = [e.id for e in held if e.state == S.CANCELLING.value]
    claimed, marked = [], []
    now = time.time()
    for execution in held:
        if execution.state != S.CLAIMED.value or (execution.delivered and execution.id not in delivered):
            continue
        if execution.preempt_deadline is not None and execution.preempt_deadline <= now:
            # preempted before its worker came for it, and its grace is over: never started, back to the queue
            end_attempt(session, execution, AttemptEnd.PREEMPTED, f"preempted by {execution.preempted_by}", _POLICY)
            continue
        try:
            with tracing.span("flux.claim", _span_attributes(execution), parent=execution.traceparent):
                claimed.append(job_for(session, execution, traceparent=tracing.current_traceparent()))
        except UNDELIVERABLE as exc:
            execution.delivered = True
            error, now = f"cannot be delivered to a worker: {exc}", time.time()
            failed = dict(
                type=EventType.WORKFLOW_FAILED, name=execution.workflow_name, value={"error": error}, time=now
            )
            append_events(session, execution, [finished_event(execution, "workflow failed", now), failed])
            finish(session, execution, S.FAILED, {"error": error}, now)
            continue
        if not execution.delivered:
            marked.append(execution)
    write_all(session, _DELIVERED, [dict(b_id=e.id, b_version=e.row_version) for e in marked])
    for execution in marked:  # the objects as the statement left the rows
        set_committed_value(execution, "delivered", True)
        set_committed_value(execution, "row_version", execution.row_version + 1)
    return claimed, cancel, [e for e in held if not S(e.state).is_terminal and e.worker_name == worker_name]


def _span_attributes(execution: ExecutionModel) -> dict[str, str | int | None]:
    return {
        "flux.execution_id": execution.id,
        "flux.workflow": execution.workflow_name,
        "flux.worker": execution.worker_name,
        "flux.attempt": execution.attempt,
    }


#: An undelivered attempt ended preempted counts nothing, so it needs none of the server's rules.
_POLICY = ExecutionPolicy()

#: What building one execution's claim may raise; database errors still fail the transaction.
UNDELIVERABLE = (NotFound, ValueError, TypeError, RecursionError)
