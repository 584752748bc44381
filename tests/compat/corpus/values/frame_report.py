from __future__ import annotations

import pandas as pd

from flux import ExecutionContext
from flux.task import task
from flux.tasks import pipeline
from flux.workflow import workflow


@task
async def build_frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({"city": [f"c{n}" for n in range(rows)], "visits": list(range(rows))})


@task
async def busiest(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values("visits", ascending=False).head(2)


@task
async def describe(df: pd.DataFrame):
    return {"cities": df["city"].tolist(), "visits": int(df["visits"].sum())}


@workflow
async def frame_report(ctx: ExecutionContext[int]):
    return await pipeline(build_frame, busiest, describe, input=ctx.input)


if __name__ == "__main__":  # pragma: no cover
    ctx = frame_report.run(5)
    print(f"state: {ctx.state.value}")
    print(f"output: {ctx.output}")
