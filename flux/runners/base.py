"""What every runner shares: the job it is given and the runner interface."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable

from flux.loader import WorkflowLoadError, load_bundle_workflow, load_workflow
from flux.runners.protocol import LogSink
from flux.runtime import Ask, ExecutionContext, EventSink, run_workflow

#: A claimed execution as the server sends it (see ``flux.server.schemas.ClaimedExecution``).
Job = dict[str, Any]


@dataclass
class Stop:
    """The two ways a worker stops a running attempt.

    ``cancel``: a user cancelled the execution; the workflow records
    WORKFLOW_CANCELLED (a child gets SIGTERM, then SIGKILL after a grace period).
    ``kill``: the attempt is no longer this worker's (fenced) or is being handed back
    (a drain's deadline passed); it is killed at once and records nothing more.
    """

    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    kill: asyncio.Event = field(default_factory=asyncio.Event)


def context_for(job: Job, emit: EventSink, ask: Ask | None = None) -> ExecutionContext:
    return ExecutionContext(
        execution_id=job["id"],
        workflow_name=job["workflow_name"],
        input=job.get("input"),
        attempt=job.get("attempt", 1),
        completed_tasks=dict(job.get("completed_tasks") or {}),
        max_payload_size=job.get("max_payload_size"),
        emit=emit,
        recorded=dict(job.get("recorded") or {}),
        rolled_back=set(job.get("rolled_back") or ()),
        ask=ask,
        ends_on_memory_error=bool((job.get("limits") or {}).get("memory")),
    )


async def execute_job(job: Job, emit: EventSink, ask: Ask | None = None) -> None:
    """Load the job's workflow and run it; a workflow that cannot load fails the execution."""
    from flux.domain.events import EventType
    from flux.runtime import make_event

    try:
        if job.get("bundle_root"):  # unpacked by the worker's bundle cache
            workflow = load_bundle_workflow(job["bundle_root"], job["module"], job["workflow_name"])
        else:
            workflow = load_workflow(job["source"], job["workflow_name"], job.get("filename", "<workflow>"))
    except WorkflowLoadError as exc:
        emit(make_event(EventType.WORKFLOW_FAILED, job["workflow_name"], value={"error": str(exc)}))
        return
    await run_workflow(workflow, context_for(job, emit, ask))


class Runner(ABC):
    name: str

    @abstractmethod
    async def run(
        self, job: Job, emit: Callable[[dict], None], stop: Stop, log: LogSink | None = None, ask: Ask | None = None
    ) -> None:
        """Run one attempt. ``emit`` takes its events; ``log``, when given, the log lines
        the runner captured (docs/logs.md), in batches: a runner awaits it before it
        reads more of the attempt's output (back-pressure), and hands it every line
        written before the event that closes the attempt before that event. ``ask``:
        the worker's services to the attempt (cache lookups, secrets: ``flux.worker.services``)."""

    async def start(self) -> None:
        """Prepare (e.g. warm a process pool). Called once before the first job."""

    async def close(self) -> None:
        """Release what ``start`` prepared."""
