from __future__ import annotations

from datetime import timedelta

from flux import ExecutionContext
from flux.task import task
from flux.workflow import workflow


@task
async def booking_window(days: int) -> timedelta:
    return timedelta(days=days, hours=6)


@workflow
async def elapsed_span(ctx: ExecutionContext[int]):
    window = await booking_window(ctx.input)
    return window * 2


if __name__ == "__main__":  # pragma: no cover
    ctx = elapsed_span.run(1)
    print(f"type: {type(ctx.output).__name__}")
    print(f"output: {ctx.output}")
    print(f"hours: {ctx.output.total_seconds() / 3600}")
