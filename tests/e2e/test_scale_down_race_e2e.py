"""The autoscaler never stops a worker that holds an attempt (docs/autoscaling.md,
"Scale-down without losing work"), raced in the main step with a real server and a
real ``local`` pool worker process.

The race: a pass has chosen the pool's idle worker for scale-down (its row is
STOPPING, to be stopped after ``DRAIN_GRACE``) when a claim lands on it. On one
replica a claim can reach a drained worker only in the instant between the pass's
commit and dispatch hearing of the drain (another replica: until it hears), too short
to aim at from a test, so the operator's undrain opens the worker to dispatch again and
the next run is claimed by it while its row is still STOPPING: the state that race
leaves. The run waits on a gate the test opens only once the pass has answered."""

from __future__ import annotations

from pathlib import Path

import pytest
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 30.0
SOURCE = """
import asyncio
from pathlib import Path

from flux import ResourceRequest, workflow

ACCEL = ResourceRequest(resources={"accel": 1})


@workflow.with_options(requests=ACCEL)
async def quick(ctx):
    return "done"


@workflow.with_options(requests=ACCEL)
async def gated(ctx):
    while not Path(ctx.input).exists():
        await asyncio.sleep(0.05)
    return "through"
"""


def pool_members(client: FluxClient) -> dict[str, str]:
    return {w["name"]: w["state"] for w in client.show_pool("accel")["workers"]}


def test_a_claim_that_lands_on_a_worker_being_scaled_down_keeps_it_and_completes(cluster, client, workflow_file):
    gate: Path = cluster.home / "gate"
    client.register_file(workflow_file(SOURCE))
    client.create_pool(
        "accel",
        "local",
        resources={"cpu": 1, "accel": 1},
        slots=1,
        min=0,
        max=1,
        idle_timeout=1,
        options={"worker_args": ["--heartbeat-interval", "0.5", "--runner", "inprocess"]},
    )
    first = client.wait(client.run("quick")["id"], WAIT)
    assert first["state"] == "COMPLETED", first
    worker = first["worker_name"]
    # idle past its timeout: the pass drains it, and stops it only DRAIN_GRACE (5 s) later
    chosen = eventually(
        lambda: (members := pool_members(client)).get(worker, "gone") in ("stopping", "gone") and [members],
        WAIT,
        "never chosen for scale-down",
    )
    assert chosen == [{worker: "stopping"}], "stopped before a claim could race it"
    assert client.show_worker(worker)["state"] == "DRAINED"
    client.undrain_worker(worker)
    raced = client.run("gated", str(gate))["id"]
    claimed = eventually(
        lambda: (e := client.execution(raced))["state"] in ("CLAIMED", "RUNNING") and e, WAIT, "never claimed"
    )
    assert claimed["worker_name"] == worker
    # the pass that sees it holding an attempt keeps it: running again, not stopped, not drained
    eventually(lambda: pool_members(client) == {worker: "running"}, WAIT, "the busy worker was not kept")
    assert client.show_worker(worker)["state"] == "ONLINE"
    gate.touch()
    done = client.wait(raced, WAIT)
    assert (done["state"], done["worker_name"], done["attempt"]) == ("COMPLETED", worker, 1)
    ends = [e["value"]["end"] for e in client.events(raced) if e["type"] == "ATTEMPT_ENDED"]
    assert ends == ["finished"]  # its one attempt ran to the end: never handed back by a stopping worker
