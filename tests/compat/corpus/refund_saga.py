"""rollback=: a saga compensation here (the MigrationWarning says so)."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow


async def refund(order: str):
    return None


@task.with_options(rollback=refund)
async def charge(order: str):
    return f"charged {order}"


@task
async def ship(order: str):
    raise RuntimeError("no courier")


@workflow
async def refund_saga(ctx: ExecutionContext[str]):
    await charge(ctx.input)
    return await ship(ctx.input)


if __name__ == "__main__":
    print(refund_saga.run("A1").to_json())
