"""The run-result API: run(), has_succeeded, to_json()."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow


@task
def greet(name: str):
    return f"Good morning, {name}"


@workflow
async def greet_result(ctx: ExecutionContext[str]):
    return await greet(ctx.input)


if __name__ == "__main__":
    ctx = greet_result.run("Ada")
    assert ctx.has_succeeded and not ctx.has_failed
    print(ctx.to_json())
