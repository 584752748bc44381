"""A lean worker (docs/footprint.md): one warm child when idle, a pool that grows with
a burst up to the slots and shrinks back after the idle timeout; children forked from
a template that shares the worker's pages, or, started afresh, that import only what
running a workflow needs."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest
from waiting import eventually

from flux.client import FluxClient
from flux.worker.runners.base import Job, Stop
from flux.worker.runners.subprocess import SubprocessRunner

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


def job(n: int, seconds: float) -> Job:
    return Job(
        id=f"nap{n}",
        workflow_name="nap",
        workflow_version=1,
        source=SOURCE,
        filename="nap.py",
        input=seconds,
        attempt=1,
        completed_tasks={},
    )


async def _burst_then_idle() -> tuple[int, int, list[int], int]:
    # 3 s idle: no child of the burst is retired while the burst still runs, however loaded
    # the machine (0.5 s was, with a full CI run beside it)
    runner = SubprocessRunner(warm_processes=1, max_idle=4, idle_timeout=3.0)
    await runner.start()
    try:
        events: list[dict] = []
        await asyncio.gather(*(runner.run(job(n, 0.3), events.append, Stop()) for n in range(4)))
        assert sum(e["type"] == "WORKFLOW_COMPLETED" for e in events) == 4
        after_burst = len(runner._pool)
        pids = [child.pid for child, _ in runner._pool]
        deadline = asyncio.get_running_loop().time() + 30
        while len(runner._pool) > 1 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)  # past the idle timeout and a reaper tick
        return after_burst, len(runner._pool), pids, runner._pool[0][0].pid
    finally:
        await runner.close()


def test_the_pool_grows_with_a_burst_and_shrinks_back_after_the_idle_timeout():
    after_burst, after_idle, pids, kept = asyncio.run(_burst_then_idle())
    assert after_burst == 4 and after_idle == 1
    assert kept == pids[-1]  # the most recently used child stays warm; the longest idle went first
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids[:-1])


def test_a_child_imports_neither_the_worker_side_runners_nor_packaging():
    probe = (
        "import sys, flux.worker.runners.child; print(sorted(m for m in sys.modules if m.startswith(("
        "'flux.worker.runners.docker', 'flux.worker.runners.subprocess', 'packaging', 'httpx', 'psutil'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def _tree(worker_pid: int) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """A worker's direct children, and its grandchildren."""
    direct = psutil.Process(worker_pid).children()
    return direct, [grandchild for child in direct for grandchild in child.children()]


@pytest.mark.integration
def test_an_idle_worker_keeps_one_warm_child_and_returns_to_it_after_a_burst(make_cluster, workflow_file):
    cluster = make_cluster()
    worker = cluster.start_worker("w1", max_concurrent_executions=4, extra_args=("--child-idle-timeout", "1"))

    def children() -> list[int]:  # forked by the worker's template, its one direct child
        return [child.pid for child in _tree(worker.pid)[1]]

    eventually(lambda: len(children()) == 1, 10, "no warm child")
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(SOURCE))
        runs = [client.run("nap", 10.0)["id"] for _ in range(4)]  # long enough to be seen running together
        during = eventually(lambda: (now := children()) and len(now) >= 4 and now, 30, "never four children")
        assert all(client.wait(run, 60)["state"] == "COMPLETED" for run in runs)
    assert len(during) == 4
    eventually(
        lambda: len(children()) == 1 and children()[0] not in during, 10, "the pool did not shrink to one fresh child"
    )  # the one kept warm served: a fresh fork replaced it


@pytest.mark.integration
def test_children_are_forked_from_a_template_that_dies_with_the_worker(make_cluster, workflow_file):
    cluster = make_cluster()
    worker = cluster.start_worker("w1")
    eventually(lambda: len(_tree(worker.pid)[1]) == 1, 10, "no warm child")
    (template,), (child,) = _tree(worker.pid)
    assert child.cmdline() == template.cmdline() == psutil.Process(worker.pid).cmdline()  # forked, not started
    assert os.getsid(template.pid) == template.pid and os.getsid(child.pid) == child.pid  # sessions of their own
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(SOURCE))
        assert client.wait(client.run("nap", 0.1)["id"], 60)["state"] == "COMPLETED"

    os.kill(worker.pid, signal.SIGKILL)  # the worker alone: the template and its children follow
    eventually(
        lambda: not any(_alive(p) for p in (template, child)), 10, "the template or its child outlived the worker"
    )


@pytest.mark.integration
def test_without_fork_children_each_child_starts_a_fresh_interpreter(make_cluster, workflow_file):
    cluster = make_cluster()
    worker = cluster.start_worker("w1", extra_args=("--no-fork-children",))
    eventually(lambda: len(_tree(worker.pid)[0]) == 1, 10, "no warm child")
    (child,), grandchildren = _tree(worker.pid)
    assert child.cmdline()[-2:] == ["-m", "flux.worker.runners.child"] and grandchildren == []
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(SOURCE))
        assert client.wait(client.run("nap", 0.1)["id"], 60)["state"] == "COMPLETED"


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
