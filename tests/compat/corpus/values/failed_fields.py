from __future__ import annotations

import json

from flux import ExecutionContext
from flux.task import task
from flux.workflow import workflow


@task
async def parse_port(text: str):
    return int(text)


@workflow
async def failed_fields(ctx: ExecutionContext[str]):
    return await parse_port(ctx.input)


if __name__ == "__main__":  # pragma: no cover
    ctx = failed_fields.run("eighty")
    fields = json.loads(ctx.to_json())
    print(f"state: {fields['state']}")
    print(f"output: {fields['output']}")
