"""namespace= on the workflow."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow


@task
async def invoice(customer: str):
    return f"invoice for {customer}"


@workflow.with_options(namespace="billing")
async def billing_invoice(ctx: ExecutionContext[str]):
    return await invoice(ctx.input)


if __name__ == "__main__":
    print(billing_invoice.run("acme").to_json())
