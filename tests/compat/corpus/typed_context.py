"""ExecutionContext[dict] in a signature, without postponed annotations."""

from flux import ExecutionContext, task, workflow


@task
async def total(prices: list):
    return sum(prices)


@workflow
async def typed_context(ctx: ExecutionContext[dict]):
    return {"total": await total(ctx.input["prices"])}


if __name__ == "__main__":
    print(typed_context.run({"prices": [3, 4]}).to_json())
