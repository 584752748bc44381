"""flux.routing require/score/prefer/least, static terms only."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.routing import label, least, load, prefer, require, score


@task
async def query(q: str):
    return {"rows": [q.upper()]}


@workflow.with_options(
    affinity=require(label("role") == "cpu", label("maintenance") != "true"),
    routing=score(prefer(label("zone") == "a", weight=5), least(load())),
)
async def routed_query(ctx: ExecutionContext[str]):
    return await query(ctx.input)


if __name__ == "__main__":
    print(routed_query.run("count").to_json())
