"""A failure's output carries flux-core's type and message."""

from __future__ import annotations

from flux import ExecutionContext, workflow


@workflow
async def failing_job(ctx: ExecutionContext):
    raise RuntimeError("disk full")


if __name__ == "__main__":
    ctx = failing_job.run()
    assert ctx.has_failed
    print(ctx.to_json())
