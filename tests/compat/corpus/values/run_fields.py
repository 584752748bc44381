from __future__ import annotations

import json

from flux import ExecutionContext
from flux.task import task
from flux.workflow import workflow


@task
async def shout(word: str):
    return word.upper()


@workflow
async def run_fields(ctx: ExecutionContext[str]):
    return await shout(ctx.input)


if __name__ == "__main__":  # pragma: no cover
    ctx = run_fields.run("hey")
    fields = json.loads(ctx.to_json())
    print(f"keys: {list(fields)[:8]}")
    print(f"namespace: {fields['workflow_namespace']}")
    print(f"worker: {fields['current_worker']!r}")
    print(f"output: {fields['output']}")
