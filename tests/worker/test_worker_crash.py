"""A crashed worker never loses or double-runs an execution."""

from __future__ import annotations

import time

import pytest

from flux.client import FluxClient

RESUMABLE = """
    import asyncio, pathlib
    from flux import task, workflow

    @task
    async def record(path, label):
        with open(path, "a") as log:
            log.write(label + "\\n")
        return label

    @task
    async def wait_for(path):
        while not pathlib.Path(path).exists():
            await asyncio.sleep(0.05)
        return "released"

    @workflow
    async def resumable(ctx):
        first = await record(ctx.input["log"], "first")
        gate = await wait_for(ctx.input["gate"])
        last = await record(ctx.input["log"], "last")
        return [first, gate, last]
"""


@pytest.mark.slow
def test_sigkilled_worker_execution_completes_once_elsewhere_without_rerunning_tasks(
    make_cluster, workflow_file, tmp_path
):
    cluster = make_cluster(eviction_grace_period=1.5)
    log, gate = tmp_path / "side-effects.log", tmp_path / "gate"
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(RESUMABLE))
        cluster.start_worker("doomed", heartbeat_interval=0.2)
        execution = client.run("resumable", {"log": str(log), "gate": str(gate)})

        deadline = time.monotonic() + 30
        while "wait_for:1" not in {e["task_id"] for e in client.events(execution["id"]) if e["type"] == "TASK_STARTED"}:
            assert time.monotonic() < deadline, "first task never checkpointed"
            time.sleep(0.05)

        cluster.kill_worker("doomed")  # SIGKILL to the worker and its children
        evicted_by = time.monotonic() + 30
        while client.show_worker("doomed")["state"] != "OFFLINE":
            assert time.monotonic() < evicted_by, "worker was never evicted"
            time.sleep(0.1)
        assert client.execution(execution["id"])["state"] == "SCHEDULED"

        gate.touch()
        cluster.start_worker("survivor", heartbeat_interval=0.2)
        done = client.wait(execution["id"], 30)
        events = client.events(execution["id"])

    assert done["state"] == "COMPLETED" and done["output"] == ["first", "released", "last"]
    assert done["worker_name"] == "survivor" and done["attempt"] == 2
    assert log.read_text().splitlines() == ["first", "last"]  # 'first' was replayed, not re-run
    started = [e["task_id"] for e in events if e["type"] == "TASK_STARTED"]
    assert started.count("record:1") == 1
    assert [e["type"] for e in events].count("WORKFLOW_COMPLETED") == 1
    rescheduled = [e for e in events if e["type"] == "WORKFLOW_RESCHEDULED"]
    assert len(rescheduled) == 1 and "lost (no heartbeat" in rescheduled[0]["value"]["reason"]
