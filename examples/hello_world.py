"""The smallest workflow: one task, its result returned."""

from flux import task, workflow


@task
async def say_hello(name: str) -> str:
    return f"Hello, {name}"


@workflow
async def hello_world(ctx):
    return await say_hello(ctx.input or "World")
