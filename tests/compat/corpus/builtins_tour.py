"""flux.tasks builtins under their flux-core names."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.tasks import now, parallel, pipeline, progress, randint, randrange, sleep, uuid4


@task
async def double(x: int):
    return x * 2


@task
async def inc(x: int):
    return x + 1


@workflow
async def builtins_tour(ctx: ExecutionContext[int]):
    started = await now()
    ident = await uuid4()
    await sleep(0.01)
    await progress({"step": "parallel"})
    pair = await parallel(double(ctx.input), inc(ctx.input), max_concurrent=1)
    piped = await pipeline(double, inc, input=ctx.input)
    dice = await randint(1, 6)
    even = await randrange(0, 10, 2)
    return {
        "pair": pair,
        "piped": piped,
        "dice_ok": 1 <= dice <= 6,
        "even": even % 2 == 0,
        "stamped": started.year > 2000,
        "ident": len(str(ident)),
    }


if __name__ == "__main__":
    print(builtins_tour.run(5).to_json())
