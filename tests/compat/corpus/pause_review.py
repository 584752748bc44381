"""pause(name, output=...), then resume(execution_id, value)."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.tasks import pause


@task
async def draft(topic: str):
    return f"draft on {topic}"


@workflow
async def pause_review(ctx: ExecutionContext[str]):
    text = await draft(ctx.input)
    verdict = await pause("review", output={"draft": text})
    return {"draft": text, "verdict": verdict}


if __name__ == "__main__":
    ctx = pause_review.run("tides")
    assert ctx.is_paused
    ctx = pause_review.resume(ctx.execution_id, "approved")
    print(ctx.to_json())
