"""Fan out: tasks started together with parallel() run concurrently."""

import asyncio

from flux import parallel, task, workflow


@task
async def square(n: int) -> int:
    await asyncio.sleep(0.1)
    return n * n


@workflow
async def sum_of_squares(ctx):
    numbers = ctx.input or [1, 2, 3, 4]
    squares = await parallel(*(square(n) for n in numbers))
    return sum(squares)
