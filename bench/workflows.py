"""The workflow module the cluster scenarios register (B1, B2, B6)."""

SOURCE = """
import asyncio

from flux import task, workflow


@task
async def noop(x):
    return x


@task
async def tick(i):
    await asyncio.sleep(0)
    return i


@workflow
async def bench_trivial(ctx):
    return await noop(ctx.input)


@workflow
async def bench_chain(ctx):
    for i in range(ctx.input["tasks"]):
        await tick(i)
    return ctx.input["tasks"]
"""

TRIVIAL = "bench_trivial"
CHAIN = "bench_chain"
