"""A lean worker (docs/footprint.md): one warm child when idle, a pool that grows with
a burst up to the slots and shrinks back after the idle timeout; children that import
only what running a workflow needs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from flux.client import FluxClient
from flux.runners.base import Stop
from flux.runners.subprocess import SubprocessRunner

SOURCE = textwrap.dedent(
    """
    import asyncio
    from flux import workflow

    @workflow
    async def nap(ctx):
        await asyncio.sleep(ctx.input)
        return ctx.input
    """
)


def job(n: int, seconds: float) -> dict:
    return {"id": f"nap{n}", "workflow_name": "nap", "workflow_version": 1, "source": SOURCE, "filename": "nap.py",
            "input": seconds, "attempt": 1, "completed_tasks": {}}


async def _burst_then_idle() -> tuple[int, int, list[int], int]:
    runner = SubprocessRunner(warm_processes=1, max_idle=4, idle_timeout=0.5)
    await runner.start()
    try:
        events: list[dict] = []
        await asyncio.gather(*(runner.run(job(n, 0.3), events.append, Stop()) for n in range(4)))
        assert sum(e["type"] == "WORKFLOW_COMPLETED" for e in events) == 4
        after_burst = len(runner._pool)
        pids = [child.pid for child, _ in runner._pool]
        await asyncio.sleep(2.0)  # past the idle timeout and a reaper tick
        return after_burst, len(runner._pool), pids, runner._pool[0][0].pid
    finally:
        await runner.close()


def test_the_pool_grows_with_a_burst_and_shrinks_back_after_the_idle_timeout():
    after_burst, after_idle, pids, kept = asyncio.run(_burst_then_idle())
    assert after_burst == 4 and after_idle == 1
    assert kept == pids[-1]  # the most recently used child stays warm; the longest idle went first
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids[:-1])


def test_a_child_imports_neither_the_worker_side_runners_nor_packaging():
    probe = "import sys, flux.runners.child; print(sorted(m for m in sys.modules if m.startswith(('flux.runners.docker', 'flux.runners.subprocess', 'packaging', 'httpx', 'psutil'))))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


@pytest.mark.integration
def test_an_idle_worker_keeps_one_warm_child_and_returns_to_it_after_a_burst(make_cluster, workflow_file):
    cluster = make_cluster()
    worker = cluster.start_worker("w1", max_concurrent_executions=4, extra_args=("--child-idle-timeout", "1"))
    process = psutil.Process(worker.pid)

    def children() -> int:
        return len([c for c in process.children() if "flux.runners.child" in " ".join(c.cmdline())])

    deadline = time.monotonic() + 10
    while children() != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children() == 1
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(SOURCE))
        runs = [client.run("nap", 1.0)["id"] for _ in range(4)]
        time.sleep(0.6)
        during = children()
        assert all(client.wait(run, 60)["state"] == "COMPLETED" for run in runs)
    assert during == 4
    deadline = time.monotonic() + 10
    while children() != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert children() == 1
