"""Retries with backoff: a task that fails twice, then succeeds."""

from flux import task, workflow

attempts = {"count": 0}


@task.with_options(retry_max_attempts=3, retry_delay=0.1, retry_backoff=2)
async def flaky() -> str:
    attempts["count"] += 1
    if attempts["count"] < 3:
        raise ConnectionError(f"transient failure #{attempts['count']}")
    return f"succeeded on attempt {attempts['count']}"


@workflow
async def retrying(ctx):
    return await flaky()
