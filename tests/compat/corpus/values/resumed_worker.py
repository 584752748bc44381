from __future__ import annotations

import json

from flux import ExecutionContext
from flux.task import task
from flux.tasks import pause
from flux.workflow import workflow


@task
async def draft(topic: str):
    return f"draft on {topic}"


@workflow
async def resumed_worker(ctx: ExecutionContext[str]):
    text = await draft(ctx.input)
    await pause("proofread")
    return text.upper()


if __name__ == "__main__":  # pragma: no cover
    ctx = resumed_worker.run("tides")
    print(f"paused worker: {json.loads(ctx.to_json())['current_worker']!r}")
    ctx = resumed_worker.run(execution_id=ctx.execution_id)
    fields = json.loads(ctx.to_json())
    print(f"resumed worker: {fields['current_worker']!r}")
    print(f"output: {fields['output']}")
