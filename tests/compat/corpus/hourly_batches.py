"""A task name template, schedule=interval(...), flux-core's import paths."""

from __future__ import annotations

from flux import task, workflow
from flux.domain.execution_context import ExecutionContext
from flux.domain.schedule import interval


@task.with_options(name="batch_{number}")
async def batch(number: int):
    return number * 10


@workflow.with_options(schedule=interval(hours=1))
async def hourly_batches(ctx: ExecutionContext[int]):
    return [await batch(n) for n in range(ctx.input or 2)]


if __name__ == "__main__":
    print(hourly_batches.run(3).to_json())
