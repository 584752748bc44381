from __future__ import annotations

from flux import ExecutionContext, pause
from flux.task import task
from flux.workflow import workflow


@task
async def price_quote(item: str):
    return {"item": item, "price": 40}


@workflow
async def pause_offer(ctx: ExecutionContext[str]):
    offer = await price_quote(ctx.input)
    answer = await pause("offer_review", output=offer)
    return {"offer": offer, "answer": answer}


if __name__ == "__main__":  # pragma: no cover
    ctx = pause_offer.run("lamp")
    print(f"paused: {ctx.is_paused}")
    print(f"offered: {ctx.events[-1].value['output']}")
    print(f"pause name: {ctx.events[-1].value['name']}")
    done = pause_offer.resume(ctx.execution_id, "accepted")
    print(f"output: {done.output}")
