"""Resource requests and affinity: dispatched only to a worker that satisfies both."""

from flux import ResourceRequest, task, workflow


@task
async def describe(region: str) -> str:
    return f"ran in {region}"


@workflow.with_options(
    requests=ResourceRequest(cpu=1, memory="256Mi", packages=["packaging>=20"]),
    affinity={"region": "us-east-1"},
)
async def regional_job(ctx):
    return await describe("us-east-1")
