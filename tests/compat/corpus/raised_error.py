"""ExecutionError as flux-core code raises it itself, ExecutionError(inner, message=...),
beside the one a failed task raises."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.errors import ExecutionError


@task
async def parse(text: str) -> int:
    return int(text)


def check(value: int) -> int:
    if value < 0:
        raise ExecutionError(ValueError(value), message=f"{value} is negative")
    return value


@workflow
async def raised_error(ctx: ExecutionContext[list[str]]):
    results = []
    for text in ctx.input:
        try:
            value = await parse(text)
        except ExecutionError as error:
            results.append(type(error.inner_exception).__name__)
            continue
        try:
            results.append(check(value))
        except ExecutionError as error:
            results.append(error.message)
    return results


if __name__ == "__main__":
    print(raised_error.run(["4", "x", "-2"]).to_json())
