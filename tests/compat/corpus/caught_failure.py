"""except ExecutionError around a failing task; flux.utils.to_json."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.errors import ExecutionError
from flux.utils import to_json


@task
async def flaky(n: int):
    raise ValueError(f"bad input {n}")


@workflow
async def caught_failure(ctx: ExecutionContext[int]):
    try:
        await flaky(ctx.input)
    except ExecutionError as error:
        return {"recovered": True, "cause": type(error.inner_exception).__name__}


if __name__ == "__main__":
    print(to_json(caught_failure.run(3)))
