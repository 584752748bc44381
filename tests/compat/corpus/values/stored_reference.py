from __future__ import annotations

from flux import ExecutionContext
from flux.output_storage import LocalFileStorage
from flux.task import task
from flux.workflow import workflow

storage = LocalFileStorage()


@task
async def inventory(count: int):
    return {f"sku-{n}": n * 3 for n in range(count)}


@workflow.with_options(output_storage=storage)
async def stored_reference(ctx: ExecutionContext[int]):
    return await inventory(ctx.input)


if __name__ == "__main__":  # pragma: no cover
    ctx = stored_reference.run(3)
    print(f"type: {type(ctx.output).__name__}")
    print(f"storage: {ctx.output.storage_type}")
    print(f"value: {storage.retrieve(ctx.output)}")
