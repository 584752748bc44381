"""task.map(items)."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow


@task
async def square(n: int):
    return n * n


@workflow
async def mapped_squares(ctx: ExecutionContext[list]):
    return await square.map(ctx.input)


if __name__ == "__main__":
    print(mapped_squares.run([1, 2, 3]).to_json())
