"""requires_approval=True: the task waits for a resume before it runs."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow


@task.with_options(requires_approval=True)
async def deploy(version: str):
    return f"deployed {version}"


@workflow
async def gated_deploy(ctx: ExecutionContext[str]):
    return await deploy(ctx.input)


if __name__ == "__main__":
    ctx = gated_deploy.run("1.2")
    assert ctx.is_paused
    print(gated_deploy.run(execution_id=ctx.execution_id).to_json())
