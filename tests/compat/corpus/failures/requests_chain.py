"""flux-core's ``resource_requests`` shape: workflows with ``requests=`` whose bodies read
``ctx.requests`` (which neither engine's context has), each run given the last one's output,
then that output spread into a dict, which stops the program on both engines."""

from __future__ import annotations

import json

from flux import ExecutionContext
from flux.domain.resource_request import ResourceRequest
from flux.task import task
from flux.workflow import workflow


@task
async def size_of(rows: list) -> int:
    return len(rows)


@workflow.with_options(name="prepare_rows", requests=ResourceRequest(cpu=2, memory="1Gi"))
async def prepare_rows(ctx: ExecutionContext[dict]):
    print(f"asked for cpu={ctx.requests.cpu}")
    return {"rows": ctx.input["rows"], "count": await size_of(ctx.input["rows"])}


@workflow.with_options(name="fit_rows", requests=ResourceRequest.with_gpu(1))
async def fit_rows(ctx: ExecutionContext[dict]):
    print(f"asked for gpu={ctx.requests.gpu}")
    return {"fitted": await size_of(ctx.input["rows"])}


if __name__ == "__main__":  # pragma: no cover
    prepared = prepare_rows.run({"rows": [1, 2, 3]})
    print(f"prepared: {prepared.state.value} {json.loads(prepared.to_json())['output']}")
    fitted = fit_rows.run(prepared.output)
    shown = json.loads(fitted.to_json())
    print(f"fitted: {fitted.state.value} given {shown['input']}")
    print(f"output types: {type(prepared.output).__name__}, {type(fitted.output).__name__}")
    merged = {**prepared.output, "fit": fitted.output}
    print(merged)
