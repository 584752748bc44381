"""Reading executions: one, a list, its event log, what a worker holds, and the job a
worker is sent for an attempt. No state changes here (``lifecycle`` makes them)."""

from __future__ import annotations

from typing import Any, Collection

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session, defer

from flux.domain.allotment import Allotment
from flux.domain.events import HOLDING_STATES, REPLAYED_EVENTS, ExecutionState
from flux.domain.workflow_options import gang_from_json
from flux.protocol.gangs import GangSeat
from flux.server import payloads, workflows
from flux.server.errors import NotFound
from flux.server.executions import gang_reads, replay
from flux.server.models import ExecutionEventModel, ExecutionModel
from flux.server.schemas import ClaimedExecution, EventOut, ExecutionInfo, Failure


def not_found(execution_id: str) -> NotFound:
    return NotFound(f"execution {execution_id!r} not found")


def visible(row: ExecutionModel | None, namespace: str | None) -> bool:
    """Whether a client of ``namespace`` sees ``row`` (None: the server's own read sees
    every row). One in another namespace is absent, never forbidden: no 403 tells
    that it exists (docs/namespaces.md)."""
    return row is not None and (namespace is None or row.namespace == namespace)


#: Loader options for work that never reads an execution's payloads (a checkpoint, a
#: claim): its input and output, up to ``max_payload_size`` each, stay in the database.
WITHOUT_PAYLOADS = (defer(ExecutionModel.input), defer(ExecutionModel.output))


#: Statements built once: SQLAlchemy then computes their cache keys once, not per call
#: (``session.get`` built its own select each time: ~80 % more CPU per read).
_ROW = select(ExecutionModel).where(ExecutionModel.id == bindparam("id"))
_ROW_WITHOUT_PAYLOADS = _ROW.options(*WITHOUT_PAYLOADS)
_STATE = select(ExecutionModel.state).where(ExecutionModel.id == bindparam("id"))
_STATE_IN = _STATE.where(ExecutionModel.namespace == bindparam("namespace"))
_CHILDREN = (
    select(ExecutionModel.id)
    .where(ExecutionModel.parent_id == bindparam("parent"))
    .order_by(ExecutionModel.scheduled_at)
)
_HELD_BY = select(ExecutionModel).where(
    ExecutionModel.worker_name == bindparam("worker"), ExecutionModel.state.in_(HOLDING_STATES)
)


def get_row(session: Session, execution_id: str, namespace: str | None = None, payloads: bool = True) -> ExecutionModel:
    row = session.scalar(_ROW if payloads else _ROW_WITHOUT_PAYLOADS, {"id": execution_id})
    if not visible(row, namespace):
        raise not_found(execution_id)
    return row


def state_of(session: Session, execution_id: str, namespace: str | None = None) -> str:
    """The state alone: what a waiting client re-reads on each change (not the payloads)."""
    if namespace is None:
        state = session.scalar(_STATE, {"id": execution_id})
    else:
        state = session.scalar(_STATE_IN, {"id": execution_id, "namespace": namespace})
    if state is None:
        raise not_found(execution_id)
    return state


def finished(
    session: Session, execution_id: str, namespace: str | None, final: bool, woken: bool = False
) -> ExecutionInfo | None:
    """The execution once it is over (or, ``final``, in whatever state), else None: what a
    waiting client reads, in one trip to a thread. Its first read is the state alone; once
    a change woke it (most often the end), the row at once: one statement fewer between
    the last checkpoint and the answer."""
    if not final and not woken and not ExecutionState(state_of(session, execution_id, namespace)).is_terminal:
        return None
    row = get_row(session, execution_id, namespace)
    if not final and not ExecutionState(row.state).is_terminal:
        return None  # a change that was not the end
    return _with_children(session, row)


def get(session: Session, execution_id: str, namespace: str | None = None) -> ExecutionInfo:
    """One execution, with the children its calls started (docs/waits.md)."""
    return _with_children(session, get_row(session, execution_id, namespace))


def _with_children(session: Session, row: ExecutionModel) -> ExecutionInfo:
    execution = info(row)
    execution.failure = Failure.parsed({"failure": row.failure})
    execution.children = list(session.scalars(_CHILDREN, {"parent": row.id}))
    if row.gang is not None:  # a gang's members, by rank (docs/gangs.md)
        execution.members = gang_reads.members_info(session, row.id)
    return execution


def events(session: Session, execution_id: str, after: int = 0, namespace: str | None = None) -> list[EventOut]:
    # the payloads load only if a page holds an event that refers to them
    execution = session.get(ExecutionModel, execution_id, options=WITHOUT_PAYLOADS)
    if not visible(execution, namespace):
        raise not_found(execution_id)
    rows = session.scalars(
        select(ExecutionEventModel)
        .where(ExecutionEventModel.execution_id == execution_id, ExecutionEventModel.seq > after)
        .order_by(ExecutionEventModel.seq)
    )
    return [
        EventOut(
            seq=r.seq,
            type=r.type,
            name=r.name,
            task_id=r.task_id,
            value=payloads.resolve(r.type, r.value, execution),
            time=r.time,
            worker_name=r.worker_name,
        )
        for r in rows
    ]


def held_by(session: Session, worker_name: str) -> list[ExecutionModel]:
    return list(session.scalars(_HELD_BY, {"worker": worker_name}))


def job_for(session: Session, execution: ExecutionModel, traceparent: str | None = None) -> ClaimedExecution:
    """What a worker is sent to run an attempt: the source, the input, and the
    results of tasks and waits that completed in earlier attempts (replayed, not re-run);
    ``traceparent``: the span its attempt hangs under (the claim's; docs/tracing.md)."""
    code = workflows.code_of(session, execution)
    claim = ClaimedExecution(
        id=execution.id,
        workflow_name=execution.workflow_name,
        workflow_version=execution.workflow_version,
        source=code.source,
        filename=code.filename,
        bundle=code.bundle,
        module=code.module,
        input=execution.input,
        attempt=execution.attempt,
        # a first attempt has nothing to replay: spare the query
        completed_tasks=_completed_tasks(session, execution.id) if execution.attempt > 1 else {},
        requests=execution.requests,
        gpus=(execution.allotment or {}).get("gpus"),  # for older workers: they pin from this
        allotment=Allotment.from_json(execution.allotment),  # what the runner enforces
        traceparent=traceparent,
        **(replay.recorded(session, execution.id) if execution.attempt > 1 else {}),
        gang=seat(session, execution) if execution.gang_id is not None else None,
    )
    claim.model_dump_json()  # fails here, alone, rather than in the response with the others
    return claim


def seat(session: Session, member: ExecutionModel) -> GangSeat:
    """A member's seat in the gang's current attempt (its job carries it)."""
    gang = gang_from_json(session.get(ExecutionModel, member.gang_id).gang)
    here = session.scalars(
        select(ExecutionModel.rank)
        .where(ExecutionModel.gang_id == member.gang_id, ExecutionModel.worker_name == member.worker_name)
        .order_by(ExecutionModel.rank)
    ).all()
    return GangSeat(
        gang_id=member.gang_id,
        rank=member.rank,
        size=gang.size,
        local_rank=here.index(member.rank) if member.rank in here else 0,
        local_size=max(1, len(here)),
        start_timeout=gang.start_timeout,
    )


def _completed_tasks(session: Session, execution_id: str) -> dict[str, Any]:
    rows = session.execute(
        select(ExecutionEventModel.task_id, ExecutionEventModel.value)
        .where(
            ExecutionEventModel.execution_id == execution_id,
            ExecutionEventModel.type.in_(REPLAYED_EVENTS),
        )
        .order_by(ExecutionEventModel.seq)  # completion order: rollbacks run in its reverse
    )
    return {task_id: value for task_id, value in rows}


#: Payload columns: an item of a list carries them only when asked for (``history``).
PAYLOADS = ("input", "output")


def info(row: ExecutionModel, include: Collection[str] = PAYLOADS) -> ExecutionInfo:
    """The API's view of a row; ``input``/``output`` only when in ``include`` (a list
    leaves them out: they are unset, and absent from the JSON)."""
    shown = {name: payloads.readable(getattr(row, name)) for name in PAYLOADS if name in include}
    return ExecutionInfo(
        id=row.id,
        namespace=row.namespace,
        workflow_name=row.workflow_name,
        workflow_version=row.workflow_version,
        state=row.state,
        **shown,
        error=row.error,
        worker_name=row.worker_name,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        crashes=row.crashes,
        requests=row.requests,
        affinity=row.affinity,
        routing=row.routing,
        unschedulable=row.unschedulable,
        placement_note=row.placement_note,
        scheduled_at=row.scheduled_at,
        claimed_at=row.claimed_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        schedule=row.schedule,
        scheduled_for=row.scheduled_for,
        wait=row.wait,
        parent=row.parent_id,
        deadline=row.deadline,
        priority=row.priority or 0,
        priority_class=row.priority_class,
        preemptible=row.preemptible is not False,
        concurrency=row.concurrency,
        preempted_by=row.preempted_by,
        preempt_deadline=row.preempt_deadline,
        min_runtime=row.min_runtime,
        preemption_lost_seconds=row.preemption_lost_seconds or 0.0,
        gang=getattr(row, "gang", None),
        gang_id=getattr(row, "gang_id", None),
        rank=getattr(row, "rank", None),
    )
