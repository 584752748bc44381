"""Durable waits against a real server and workers, each SIGKILLed at the critical
point: while the execution sleeps, while it is paused, while its child runs. The
execution still ends correctly and no completed task runs again (docs/waits.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest
from waiting import eventually

from flux.client import FluxClient, FluxClientError

WAITS = """
    import asyncio, pathlib, time
    from flux import call, pause, sleep, task, workflow

    @task
    def record(path, label):
        with open(path, "a") as log:
            log.write(label + "\\n")
        return label

    @task
    async def gate(path):
        while not pathlib.Path(path).exists():
            await asyncio.sleep(0.05)
        return "opened"

    @workflow.with_options(affinity={"role": "cpu"})
    async def approve(ctx):
        first = await record(ctx.input["log"], "before")
        await sleep(2)
        await record(ctx.input["log"], "slept")
        answer = await pause("approval", {"first": first})
        await record(ctx.input["log"], "after")
        return answer

    @workflow.with_options(affinity={"role": "gpu"})
    async def train(ctx):
        await record(ctx.input["log"], "child started")
        await gate(ctx.input["gate"])
        return {"trained": ctx.input["n"] * 2}

    @workflow.with_options(affinity={"role": "cpu"})
    async def pipeline(ctx):
        await record(ctx.input["log"], "parent started")
        model = await call(train, ctx.input)
        await record(ctx.input["log"], "parent done")
        return model

    @workflow.with_options(timeout=3)
    async def bounded(ctx):
        await sleep(3600)

    @task
    async def beat(path):
        while True:
            pathlib.Path(path).write_text(str(time.time()))
            await asyncio.sleep(0.05)

    @workflow.with_options(timeout=2, affinity={"role": "cpu"})
    async def stuck(ctx):
        await beat(ctx.input)
"""

#: Sleeps of a second or more end the attempt (the default threshold is 30 s).
DURABLE = {"FLUX_DURABLE_SLEEP_THRESHOLD": "1"}


def _flux(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flux", *args, "--server-url", cluster.server_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


def _gauge(cluster, state: str) -> float:
    for line in httpx.get(f"{cluster.server_url}/metrics").text.splitlines():
        if line.startswith(f'flux_executions{{state="{state}"}}'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no flux_executions gauge for {state}")


@pytest.mark.slow
@pytest.mark.integration
def test_sleep_and_pause_survive_sigkilled_workers_and_resume_elsewhere(make_cluster, workflow_file, tmp_path):
    cluster = make_cluster(eviction_grace_period=1.5)  # a killed worker is soon skipped (and evicted)
    log = tmp_path / "side-effects.log"
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(WAITS))
        cluster.start_worker("first", labels={"role": "cpu"}, heartbeat_interval=0.2, env=DURABLE)
        execution = client.run("approve", {"log": str(log)})
        eid = execution["id"]

        sleeping = eventually(lambda: (e := client.execution(eid))["state"] == "SLEEPING" and e, 30, "never slept")
        assert sleeping["worker_name"] is None and sleeping["wait"]["kind"] == "sleep"
        assert _gauge(cluster, "SLEEPING") == 1.0
        cluster.kill_worker("first")  # while it sleeps: it held nothing
        cluster.start_worker("second", labels={"role": "cpu"}, heartbeat_interval=0.2, env=DURABLE)

        paused = eventually(lambda: (e := client.execution(eid))["state"] == "PAUSED" and e, 30, "never paused")
        assert paused["wait"] == {
            "kind": "pause",
            "id": "pause:approval:1",
            "name": "approval",
            "payload": {"first": "before"},
        }
        listed = _flux(cluster, "execution", "list", "--state", "PAUSED")
        assert listed.returncode == 0 and eid[:8] in listed.stdout and "PAUSED: approval" in listed.stdout
        with pytest.raises(FluxClientError) as refused:
            client.resume(client.run("approve", {"log": str(tmp_path / "other.log")})["id"])
        assert refused.value.status == 409 and "not PAUSED" in str(refused.value)

        cluster.kill_worker("second")  # while it is paused
        cluster.start_worker("third", labels={"role": "cpu"}, heartbeat_interval=0.2, env=DURABLE)
        resumed = _flux(cluster, "execution", "resume", eid[:10], "--input", '{"approved": true}', "--format", "json")
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["state"] == "SCHEDULED"
        done = client.wait(eid, 30)
        events = client.events(eid)

    assert done["state"] == "COMPLETED" and done["output"] == {"approved": True}
    assert done["worker_name"] == "third" and done["crashes"] == 0  # waiting is not crashing
    assert log.read_text().splitlines() == ["before", "slept", "after"]  # each task once
    # a claim made to the killed worker before it was found silent comes back unrun: not a crash
    ends = [e["value"]["end"] for e in events if e["type"] == "ATTEMPT_ENDED" and e["value"]["end"] != "handed_back"]
    assert ends == ["suspended", "suspended", "finished"]
    waits = [(e["type"], e["task_id"]) for e in events if e["type"] in ("WORKFLOW_SUSPENDED", "WAIT_COMPLETED")]
    assert waits == [
        ("WORKFLOW_SUSPENDED", "sleep:1"),
        ("WAIT_COMPLETED", "sleep:1"),
        ("WORKFLOW_SUSPENDED", "pause:approval:1"),
        ("WAIT_COMPLETED", "pause:approval:1"),
    ]


@pytest.mark.integration
@pytest.mark.slow  # over ~20 s: CI's second step
def test_a_cpu_parent_calls_a_gpu_child_that_survives_its_worker_and_cancel_and_timeout_reach_waiters(
    make_cluster, workflow_file, tmp_path
):
    cluster = make_cluster(eviction_grace_period=1.5)
    log, gate = tmp_path / "side-effects.log", tmp_path / "gate"
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(WAITS))
        cluster.start_worker("cpu", labels={"role": "cpu"}, heartbeat_interval=0.2, env=DURABLE)
        cluster.start_worker("gpu-1", labels={"role": "gpu"}, heartbeat_interval=0.2, env=DURABLE)
        parent = client.run("pipeline", {"log": str(log), "gate": str(gate), "n": 21})["id"]

        waiting = eventually(
            lambda: (e := client.execution(parent))["state"] == "AWAITING_CHILD" and e, 30, "never called"
        )
        child = waiting["wait"]["child"]
        eventually(lambda: any(e["task_id"] == "gate:1" for e in client.events(child)), 30, "child never ran")
        assert client.execution(child)["worker_name"] == "gpu-1"
        cluster.kill_worker("gpu-1")  # while the child runs
        cluster.kill_worker("cpu")  # and the parent's last worker: the parent holds none
        eventually(lambda: client.execution(child)["state"] == "SCHEDULED", 30, "child never requeued")
        cluster.start_worker("gpu-2", labels={"role": "gpu"}, heartbeat_interval=0.2, env=DURABLE)
        cluster.start_worker("cpu-2", labels={"role": "cpu"}, heartbeat_interval=0.2, env=DURABLE)
        gate.touch()
        done = client.wait(parent, 30)
        shown = client.execution(child)

        assert done["state"] == "COMPLETED" and done["output"] == {"trained": 42}
        assert done["children"] == [child] and shown["parent"] == parent and done["worker_name"] == "cpu-2"
        assert shown["worker_name"] == "gpu-2" and shown["attempt"] == 2 and done["crashes"] == 0
        assert log.read_text().splitlines() == ["parent started", "child started", "parent done"]

        # cancelling a parent that waits on its child cancels the child; a paused one ends at once
        gate.unlink()
        cancelled = client.run("pipeline", {"log": str(log), "gate": str(gate), "n": 1})["id"]
        waiting = eventually(
            lambda: (e := client.execution(cancelled))["state"] == "AWAITING_CHILD" and e, 30, "never called"
        )
        eventually(
            lambda: any(e["task_id"] == "gate:1" for e in client.events(waiting["wait"]["child"])),
            30,
            "child never ran",
        )
        assert client.cancel(cancelled)["state"] == "CANCELLED"
        assert client.wait(waiting["wait"]["child"], 30)["state"] == "CANCELLED"
        assert "WAIT_COMPLETED" not in {e["type"] for e in client.events(cancelled)}  # the parent ended first
        paused = client.run("approve", {"log": str(tmp_path / "paused.log")})["id"]
        eventually(lambda: client.execution(paused)["state"] == "PAUSED", 30, "never paused")
        assert client.cancel(paused)["state"] == "CANCELLED"

        bounded = client.run("bounded")["id"]
        eventually(lambda: client.execution(bounded)["state"] == "SLEEPING", 30, "never slept")
        ended = client.wait(bounded, 30)
        assert ended["state"] == "TIMED_OUT" and "timeout of 3s exceeded (it was SLEEPING)" in ended["error"]
        assert ended["finished_at"] is not None
        beating = tmp_path / "beat"
        ended = client.wait(client.run("stuck", str(beating))["id"], 30)  # times out while its task runs
        assert ended["state"] == "TIMED_OUT" and "(it was RUNNING)" in ended["error"]
        eventually(lambda: time.time() - beating.stat().st_mtime > 1.0, 15, "the timed-out attempt was never stopped")
        assert _gauge(cluster, "TIMED_OUT") == 2.0 and _gauge(cluster, "CANCELLED") == 3.0
        schemas = httpx.get(f"{cluster.server_url}/openapi.json").json()["components"]["schemas"]
        assert {"SLEEPING", "PAUSED", "AWAITING_CHILD", "TIMED_OUT"} <= set(schemas["ExecutionState"]["enum"])
        assert {"WORKFLOW_SUSPENDED", "WAIT_COMPLETED", "WORKFLOW_TIMED_OUT"} <= set(schemas["EventType"]["enum"])
