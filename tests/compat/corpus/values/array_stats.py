from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flux import ExecutionContext
from flux.task import task
from flux.workflow import workflow


@dataclass
class Reading:
    sensor: str
    values: list[float]


@task
async def load_readings(count: int) -> Reading:
    return Reading("probe-7", [float(n) for n in range(count)])


@task
async def scale(reading: Reading) -> np.ndarray:
    return np.array(reading.values) * 2


@workflow
async def array_stats(ctx: ExecutionContext[int]):
    reading = await load_readings(ctx.input)
    scaled = await scale(reading)
    return {"sensor": reading.sensor, "count": int(scaled.size), "total": float(scaled.sum())}


if __name__ == "__main__":  # pragma: no cover
    ctx = array_stats.run(4)
    print(f"state: {ctx.state.value}")
    print(f"output: {ctx.output}")
