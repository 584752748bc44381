"""``ctx.progress`` / ``flux.progress``: PROGRESS events recorded through a real worker."""

from __future__ import annotations

import pytest

from flux import progress, workflow
from flux.client import FluxClient

PROGRESSING = """
    from flux import progress, progress_nowait, task, workflow

    @task
    async def download(n):
        for i in range(n):
            await progress({"downloaded": i + 1, "of": n})
        return n

    @task
    def crunch(n):
        progress_nowait(f"crunching {n}")
        return n * 2

    @workflow
    async def progressing(ctx):
        await ctx.progress("starting")
        total = await download(ctx.input)
        return await crunch(total)
"""


def test_progress_events_are_recorded_with_their_task(cluster, workflow_file):
    cluster.start_worker("w1")
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(PROGRESSING))
        done = client.run("progressing", 2, wait=30)
        events = client.events(done["id"])
    assert done["state"] == "COMPLETED" and done["output"] == 4
    progress_events = [(e["task_id"], e["value"]) for e in events if e["type"] == "PROGRESS"]
    assert progress_events == [
        (None, "starting"),
        ("download:1", {"downloaded": 1, "of": 2}),
        ("download:1", {"downloaded": 2, "of": 2}),
        ("crunch:1", "crunching 2"),
    ]


def test_progress_outside_a_workflow_says_where_it_belongs():
    import asyncio

    with pytest.raises(RuntimeError, match="inside a workflow"):
        asyncio.run(progress(1))


def test_progress_must_be_json():
    @workflow
    async def unjsonable(ctx):
        await ctx.progress(object())

    result = unjsonable.run()
    assert result.state.value == "FAILED" and "progress must be JSON-serialisable" in result.failure["error"]
