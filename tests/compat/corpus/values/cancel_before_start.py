from __future__ import annotations

from flux import ExecutionContext
from flux.context_managers import ContextManager
from flux.task import task
from flux.workflow import workflow


@task
async def stamp_labels(count: int):
    return [f"label-{n}" for n in range(count)]


@workflow
async def cancel_before_start(ctx: ExecutionContext[int]):
    return await stamp_labels(ctx.input or 2)


if __name__ == "__main__":  # pragma: no cover
    pending = ExecutionContext(
        workflow_id="default/cancel_before_start",
        workflow_namespace="default",
        workflow_name="cancel_before_start",
        input=3,
    )
    pending.cancel()
    ContextManager.create().save(pending)
    ctx = cancel_before_start.run(execution_id=pending.execution_id)
    print(f"state: {ctx.state.value}")
    print(f"output: {ctx.output}")
    fresh = ExecutionContext(
        workflow_id="default/cancel_before_start",
        workflow_namespace="default",
        workflow_name="cancel_before_start",
        input=2,
    )
    ContextManager.create().save(fresh)
    print(f"started later: {cancel_before_start.run(execution_id=fresh.execution_id).output}")
