"""flux-core's ``dataframe_with_pause`` shape: tasks keeping frames in output storage and a
pause, run without input, so the body fails on ``ctx.input.get`` before any task runs."""

from __future__ import annotations

import json

import pandas as pd

from flux import ExecutionContext, task, workflow
from flux.output_storage import LocalFileStorage
from flux.tasks import pause

frames = LocalFileStorage()


@task.with_options(output_storage=frames)
async def read_table(path: str) -> pd.DataFrame:
    return pd.read_csv(path)


@task.with_options(output_storage=frames)
async def count_rows(table: pd.DataFrame) -> dict:
    return {"rows": len(table)}


@workflow.with_options(name="unstarted_frame")
async def unstarted_frame(ctx: ExecutionContext[dict[str, str]]):
    table = await read_table(ctx.input.get("path"))
    answer = await pause("checked")
    return {"counted": await count_rows(table), "answer": answer}


if __name__ == "__main__":  # pragma: no cover
    ctx = unstarted_frame.run()
    print(f"state: {ctx.state.value}")
    print(f"output type: {type(ctx.output).__name__}")
    print(f"output: {ctx.output}")
    print(f"printed output: {json.loads(ctx.to_json())['output']}")
