"""schedule=cron(...) declared on the workflow."""

from __future__ import annotations

from flux import ExecutionContext, cron, task, workflow


@task
async def digest():
    return "digest sent"


@workflow.with_options(schedule=cron("30 2 * * *", timezone="UTC"))
async def nightly_digest(ctx: ExecutionContext):
    return await digest()


if __name__ == "__main__":
    print(nightly_digest.run().to_json())
