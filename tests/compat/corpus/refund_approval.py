"""requires_approval as a predicate of the call's arguments."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow


@task.with_options(requires_approval=lambda amount: amount > 100)
async def refund(amount: int):
    return f"refunded {amount}"


@workflow
async def refund_approval(ctx: ExecutionContext[list]):
    return [await refund(amount) for amount in ctx.input]


if __name__ == "__main__":
    ctx = refund_approval.run([20, 500])
    assert ctx.is_paused
    print(refund_approval.resume(ctx.execution_id, {"approved": True}).to_json())
