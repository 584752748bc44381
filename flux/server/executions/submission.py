"""Submission: a new execution, queued SCHEDULED, from a client's run or a parent's
``call`` (docs/waits.md), through the same two INSERTs. A gang's execution (the run's
gang, else its workflow's: ``flux.server.gang_options.for_run``) keeps the gang on its
row and gets its members' rows in the same transaction (``gang_members.add_members``; docs/gangs.md)."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

from sqlalchemy import insert
from sqlalchemy.orm import Session

from flux import tracing
from flux.domain.concurrency import Concurrency
from flux.domain.events import EventType, ExecutionState
from flux.domain.hooks import HookEventType
from flux.domain.policy import ExecutionPolicy
from flux.server import gang_options, outbox, payloads, workflows
from flux.server.errors import Invalid
from flux.server.eventlog import INSERT_EVENT, numbered
from flux.server.executions.gang_members import add_members
from flux.server.executions.reads import info
from flux.server.models import ExecutionModel
from flux.server.schemas import ExecutionInfo, RunRequest

S = ExecutionState

#: Built once: a statement made per call costs more to build than to run.
INSERT_EXECUTION = insert(ExecutionModel.__table__)


def submit(
    session: Session,
    namespace: str,
    name: str,
    run: RunRequest,
    policy: ExecutionPolicy,
    *,
    schedule: str | None = None,
    scheduled_for: float | None = None,
) -> ExecutionInfo:
    """Queue a run of workflow ``name`` of ``namespace``: two plain INSERTs (the
    execution and its first event), since a burst of submissions is bounded by what
    each costs the single writer. A schedule's run names it and its due time: unique
    together (within the namespace), the fire's idempotency key."""
    execution_id = uuid.uuid4().hex
    with tracing.span("flux.submit", {"flux.execution_id": execution_id, "flux.workflow": name}):
        return _submit(
            session, namespace, execution_id, name, run, policy, schedule=schedule, scheduled_for=scheduled_for
        )


def submit_child(
    session: Session,
    parent: ExecutionModel,
    execution_id: str,
    name: str,
    input: object,
    policy: ExecutionPolicy,
    gang: dict | None = None,
) -> ExecutionInfo:
    """A ``call``'s child, in its parent's namespace: its id derives from the parent
    and the call (``flux.domain.waits.child_id``); ``gang``: the call's (``call(child,
    input, gang=...)``), as a run's gang."""
    with tracing.span(
        "flux.submit", {"flux.execution_id": execution_id, "flux.workflow": name, "flux.parent": parent.id}
    ):
        run = RunRequest(input=input).model_copy(update={"gang": gang})  # the gang is checked by for_run
        return _submit(session, parent.namespace, execution_id, name, run, policy, parent.id, inherited=parent.priority)


def _submit(
    session: Session,
    namespace: str,
    execution_id: str,
    name: str,
    run: RunRequest,
    policy: ExecutionPolicy,
    parent_id: str | None = None,
    *,
    schedule: str | None = None,
    scheduled_for: float | None = None,
    inherited: int | None = None,
) -> ExecutionInfo:
    workflow = workflows.header(session, namespace, name, run.version)
    contention = _contention(workflow, run, policy, inherited)
    gang = gang_options.for_run(run.gang, (workflow.options or {}).get("gang"), policy.max_gang_size, workflow.name)
    now = time.time()
    row = dict(
        id=execution_id,
        namespace=namespace,
        workflow_id=workflow.id,
        workflow_name=workflow.name,
        workflow_version=workflow.version,
        state=S.SCHEDULED.value,
        input=run.input,
        requests=workflow.requests,
        affinity=workflow.affinity,
        routing=workflow.routing,
        pending_timeout=workflow.pending_timeout,
        pending_since=now,
        attempt=0,
        crashes=0,
        max_attempts=workflow.max_attempts or policy.default_max_attempts,
        ready_at=None,
        version_pinned=run.version is not None,
        last_seq=1,
        checkpoint_batch=0,
        delivered=False,
        scheduled_at=now,
        row_version=1,  # the ORM's optimistic-concurrency counter starts at 1
        traceparent=tracing.current_traceparent(),  # the flux.submit span; None when tracing is off
        parent_id=parent_id,
        schedule=schedule,
        scheduled_for=scheduled_for,
        wait=None,
        deadline=None if workflow.timeout is None else now + workflow.timeout,
        **contention,
        preempted_by=None,
        preempt_deadline=None,
        progress_at=None,
        preempted_at=None,
        preemption_lost_seconds=0.0,
        gang=gang,
    )
    session.execute(INSERT_EXECUTION, row)
    value = payloads.STORED[EventType.WORKFLOW_SCHEDULED.value]
    scheduled = dict(type=EventType.WORKFLOW_SCHEDULED, name=workflow.name, value=value, time=now)
    session.execute(INSERT_EVENT, numbered(row["id"], 0, [scheduled]))
    fresh = dict.fromkeys(
        (
            "output",
            "error",
            "failure",
            "worker_name",
            "unschedulable",
            "placement_note",
            "claimed_at",
            "started_at",
            "finished_at",
        )
    )
    if gang is not None:
        add_members(session, row)
    execution = SimpleNamespace(**row, **fresh)
    outbox.execution_event(session, execution, HookEventType.EXECUTION_SCHEDULED, scheduled_for=scheduled_for)
    return info(execution)


def _contention(workflow, run: RunRequest, policy: ExecutionPolicy, inherited: int | None) -> dict:  # noqa: ANN001 - a header row
    """The run's priority (its own, else its workflow's, else its parent's for a call's
    child, else the default class) and concurrency keys rendered over its input;
    422 for an unknown class or an input the key cannot be rendered from."""
    options = workflow.options or {}  # the version's options document (``WorkflowOptions.stored``)
    wanted = run.priority if run.priority is not None else options.get("priority", inherited)
    keys = []
    if options.get("concurrency"):
        keys.append(Concurrency.from_json(options["concurrency"]))
    if options.get("max_concurrency"):
        keys.append(Concurrency(f"workflow:{workflow.name}", options["max_concurrency"]))
    try:
        resolved = policy.priorities.resolve(wanted)
        rendered = [{"key": limit.render(run.input), "limit": limit.limit} for limit in keys]
    except ValueError as exc:
        raise Invalid(f"workflow {workflow.name!r}: {exc}") from None
    return dict(
        priority=resolved.value,
        priority_class=resolved.name,
        preemptible=options.get("preemptible", True),
        min_runtime=options.get("min_runtime"),
        concurrency=rendered or None,
    )
