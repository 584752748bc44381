from __future__ import annotations

from flux import ExecutionContext, cron
from flux.task import task
from flux.workflow import workflow


@task
async def collect(source: str):
    return f"collected {source}"


@workflow.with_options(schedule=cron("15 6 * * *", timezone="UTC"))
async def schedule_print(ctx: ExecutionContext[str]):
    return await collect(ctx.input or "ledger")


if __name__ == "__main__":  # pragma: no cover
    ctx = schedule_print.run("ledger")
    print(f"output: {ctx.output}")
    print(f"schedule: {schedule_print.schedule}")
    print(f"type: {schedule_print.schedule.to_dict()['type']}")
