"""A task whose body raises: flux-core's ``ctx.output`` is ``ExecutionError`` around it
(``inner_exception``), and ``to_json()`` shows the body's exception (``tasks/task_rollback``'s failure)."""

from __future__ import annotations

import json

from flux import ExecutionContext, task, workflow
from flux.errors import ExecutionError


@task
async def charge(amount: int):
    if amount > 100:
        raise ValueError(f"amount {amount} over the limit")
    return amount


@workflow
async def failed_charge(ctx: ExecutionContext[int]):
    return await charge(ctx.input)


if __name__ == "__main__":  # pragma: no cover
    ctx = failed_charge.run(250)
    print(f"state: {ctx.state.value}, has_failed: {ctx.has_failed}")
    print(f"output type: {type(ctx.output).__name__}, an ExecutionError: {isinstance(ctx.output, ExecutionError)}")
    print(f"inner: {type(ctx.output.inner_exception).__name__}: {ctx.output.inner_exception}")
    print(f"printed output: {json.loads(ctx.to_json())['output']}")
