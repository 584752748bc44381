"""flux-core's ``tasks/task_timeout`` shape: a task with ``timeout=`` that sleeps past it,
awaited directly and from another task; each failed run printed with ``to_json()``."""

from __future__ import annotations

import asyncio
import json

from flux import task, workflow
from flux.domain.execution_context import ExecutionContext


@task.with_options(timeout=1)
async def fetch_report(region: str):
    await asyncio.sleep(8)


@task
async def fetch_all():
    await fetch_report("north")


@workflow
async def report_timeout(ctx: ExecutionContext):
    await fetch_report("south")


@workflow
async def report_nested_timeout(ctx: ExecutionContext):
    await fetch_all()


if __name__ == "__main__":  # pragma: no cover
    for flow in (report_timeout, report_nested_timeout):
        ctx = flow.run()
        print(f"{ctx.workflow_name}: {ctx.state.value} {json.loads(ctx.to_json())['output']}")
        print(f"output type: {type(ctx.output).__name__}, has_failed: {ctx.has_failed}")
