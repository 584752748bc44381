"""Running a job's workflow: load it, give it its context, run it (in a child process,
or in the worker itself with the inprocess runner)."""

from __future__ import annotations

from flux.domain.events import EventType, make_event
from flux.domain.payloads import payload_levels
from flux.model.calls import failure_of
from flux.model.loader import WorkflowLoadError, load_bundle_workflow, load_workflow
from flux.model.runtime import Ask, EventSink, ExecutionContext, forget_preemption, run_workflow
from flux.worker.runners.base import Job


def context_for(job: Job, emit: EventSink, ask: Ask | None = None) -> ExecutionContext:
    return ExecutionContext(
        execution_id=job.id,
        workflow_name=job.workflow_name,
        input=job.input,
        attempt=job.attempt,
        completed_tasks=dict(job.completed_tasks),
        max_payload_size=job.max_payload_size,
        max_payload_levels=payload_levels(job.max_json_depth),
        emit=emit,
        recorded=dict(job.recorded),
        rolled_back=set(job.rolled_back),
        ask=ask,
        # a memory ceiling (planned from the allotment, or the worker's own): hitting it ends the attempt
        ends_on_memory_error=bool(job.limits and job.limits.memory),
        gang=job.gang_context(),  # a gang member's seat and peers (docs/gangs.md#on-the-worker)
    )


async def execute_job(job: Job, emit: EventSink, ask: Ask | None = None) -> None:
    """Load the job's workflow and run it; a workflow that cannot load fails the execution."""
    try:
        if job.bundle_root:  # unpacked by the worker's bundle cache
            workflow = load_bundle_workflow(job.bundle_root, job.module, job.workflow_name)
        else:
            workflow = load_workflow(job.source, job.workflow_name, job.filename)
    except WorkflowLoadError as exc:
        emit(
            make_event(
                EventType.WORKFLOW_FAILED, job.workflow_name, value={"error": str(exc), "failure": failure_of(exc)}
            )
        )
        return
    try:
        await run_workflow(workflow, context_for(job, emit, ask))
    finally:
        forget_preemption(job.id)  # a notice is this attempt's; the next one starts afresh
