"""Worker pools end to end with the ``local`` provider (docs/autoscaling.md): a real
server starts and stops real ``flux start worker`` processes from what the queue needs."""

from __future__ import annotations

import time

import pytest
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 60.0
FAST = ["--heartbeat-interval", "0.5", "--warm-children", "0"]
SOURCE = """
import asyncio

from flux import ResourceRequest, task, workflow


@task
async def nap(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "rested"


@workflow.with_options(requests=ResourceRequest(resources={"accel": 1}))
async def accelerated(ctx):
    return await nap(ctx.input or 0.1)


@workflow.with_options(requests=ResourceRequest(resources={"warp": 1}))
async def warped(ctx):
    return await nap(0.1)
"""


def local_pool(client: FluxClient, name: str = "accel", **spec) -> dict:
    body = {
        **dict(resources={"cpu": 1, "accel": 2}, slots=2, min=0, max=2, idle_timeout=3, options={"worker_args": FAST}),
        **spec,
    }
    return client.create_pool(name, "local", **body)


def workers_of(client: FluxClient, pool: str) -> list[dict]:
    return [w for w in client.list_workers() if w["labels"].get("flux.pool") == pool and w["state"] != "OFFLINE"]


@pytest.mark.slow
def test_scales_from_zero_and_back_and_starts_nothing_for_unfit_work(cluster, client, workflow_file):
    client.register_file(workflow_file(SOURCE))
    local_pool(client)
    assert client.show_pool("accel")["desired"] == 0
    unfit = client.run("warped")["id"]
    ids = [client.run("accelerated", 0.5)["id"] for _ in range(3)]
    # a worker of the pool is asked for, and explain says so while it starts
    note = eventually(
        lambda: (
            "a worker of pool accel is starting" in client.placement(ids[0])["summary"]
            and client.placement(ids[0])["summary"]
        ),
        20,
        "explain never named the starting worker",
    )
    assert "(requested " in note
    for execution_id in ids:
        execution = client.wait(execution_id, WAIT)
        assert execution["state"] == "COMPLETED", execution
        assert execution["worker_name"].startswith("accel-")
    pool = client.show_pool("accel")
    assert 1 <= pool["starting"] + pool["running"] + pool["stopping"] <= 2, pool  # accel=1 x3 on accel=2: 2 workers
    assert "1 waiting executions fit no pool" in pool["decision"], pool
    # idle past the timeout: drained, stopped, gone; the unfit execution still waits, explained
    eventually(
        lambda: client.show_pool("accel")["workers"] == [] and not workers_of(client, "accel"),
        40,
        "the idle workers were never stopped",
    )
    assert client.show_pool("accel")["desired"] == 0
    assert client.execution(unfit)["state"] == "SCHEDULED"
    assert client.placement(unfit)["unschedulable"]


@pytest.mark.slow
def test_a_failing_provider_is_retried_with_backoff_and_reported(cluster, client, tmp_path):
    script = tmp_path / "scale.sh"
    script.write_text('#!/bin/sh\necho "no quota for $FLUX_POOL ($1)" >&2\nexit 1\n')
    script.chmod(0o755)
    client.create_pool("broken", "command", resources={"cpu": 1}, min=1, max=2, options={"command": [str(script)]})
    local_pool(client, "fine", resources={"cpu": 1}, min=1)
    pool = eventually(lambda: (p := client.show_pool("broken"))["failures"] >= 2 and p, 30, "never retried")
    assert pool["provider_error"] == f"{script} exited 1: no quota for broken (1)"
    assert pool["retry_at"] > time.time() - 1 and pool["desired"] == 1
    # the loop goes on for the other pool: its minimum is started
    eventually(lambda: client.show_pool("fine")["running"] == 1, 40, "the loop stopped with the failing provider")
    # backing off, not once a pass: no failure is retried before its retry_at (a read that
    # shows one more, answered before retry_at by this host's clock, would be a retry too
    # early), and the next retry_at is later still
    first = client.show_pool("broken")
    while time.time() < first["retry_at"]:
        shown = client.show_pool("broken")
        answered = time.time()
        assert shown["failures"] == first["failures"] or answered >= first["retry_at"], (first, shown)
        time.sleep(0.1)
    again = eventually(lambda: (p := client.show_pool("broken"))["failures"] > first["failures"] and p, 60, "no retry")
    assert again["retry_at"] > first["retry_at"]
    # a deleted pool's workers are drained and stopped, its minimum notwithstanding; then it is gone
    client.delete_pool("fine")
    eventually(
        lambda: [p["name"] for p in client.list_pools()] == ["broken"] and not workers_of(client, "fine"),
        30,
        "the deleted pool's worker was never stopped",
    )


@pytest.mark.slow
def test_two_replicas_never_double_the_desired_count(replicas, tmp_path):
    """Both servers run the scaling loop on one PostgreSQL; the pass is one replica's at a time."""
    first, second = replicas
    source = tmp_path / "wf.py"
    source.write_text(SOURCE)
    with FluxClient(first.server_url) as one, FluxClient(second.server_url) as two:
        one.register_file(source)
        local_pool(one, resources={"accel": 1}, slots=1, max=6, idle_timeout=30)
        ids = [client.run("accelerated", 4)["id"] for client in (one, two) for _ in range(2)]  # 4 x accel=1: 4 workers
        seen = set()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            pool = two.show_pool("accel")
            assert pool["starting"] + pool["running"] + pool["stopping"] <= 4, pool
            seen |= {w["name"] for w in workers_of(one, "accel")}
            time.sleep(0.2)
        for execution_id in ids:
            assert one.wait(execution_id, WAIT)["state"] == "COMPLETED"
        seen |= {w["name"] for w in workers_of(one, "accel")}
        assert len(seen) == 4, seen
        assert one.show_pool("accel")["desired"] == 4
