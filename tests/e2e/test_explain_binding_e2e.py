"""Explain leads with what blocks, through a real server, worker and CLI: an execution held
only by its namespace's quota says so on its first line (not ``1/1 workers are
available``), and a cpu=64 run that no pool's template fits, with the pool at zero, says
that no pool can start a worker for it (not ``no workers are registered``)."""

from __future__ import annotations

import json

import pytest
from shared import flux
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 60.0
WIDE = {"COLUMNS": "200"}  # the summary on one line, as a wide terminal shows it
SOURCE = """
import asyncio

from flux import ResourceRequest, task, workflow


@task
async def nap(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@workflow.with_options(requests=ResourceRequest(resources={"accel": 1}))
async def trainer(ctx):
    return await nap(ctx.input)


@workflow.with_options(requests=ResourceRequest(cpu=64))
async def wide(ctx):
    return "never"


@workflow.with_options(requests=ResourceRequest(cpu=2))
async def modest(ctx):
    return "placed"
"""


def test_an_execution_held_only_by_its_quota_explains_with_the_quota_first(make_cluster, workflow_file):
    cluster = make_cluster()
    with FluxClient(cluster.server_url) as admin:
        admin.create_namespace("ml")
        admin.update_namespace("ml", quota={"resources.accel": 1})
    client = FluxClient(cluster.server_url, namespace="ml")
    client.register_file(workflow_file(SOURCE))
    cluster.start_worker("w1", max_concurrent_executions=4, extra_args=("--resource", "accel=3"))
    holding = client.run("trainer", 60)["id"]
    eventually(lambda: client.execution(holding)["state"] == "RUNNING", WAIT, "the first run never ran")
    held = client.run("trainer", 0)["id"]
    eventually(lambda: client.execution(held)["placement_note"], WAIT, "no round said why it waits")

    placement = client.placement(held)  # the API: the quota leads, the free worker follows
    assert placement["binding"] == {
        "kind": "quota",
        "message": "held by namespace ml's quota: accel 1/1 in use, this asks 1 more",
    }
    assert placement["summary"] == (
        "held by namespace ml's quota: accel 1/1 in use, this asks 1 more; 1/1 workers are available."
    )
    assert client.execution(held)["placement_note"] == placement["summary"]  # the round's note: the same truth
    shown = flux("execution", "explain", held, "--namespace", "ml", server_url=cluster.server_url, env=WIDE).stdout
    assert shown.splitlines()[0] == placement["summary"]  # the CLI's first line
    explained = flux(
        "execution", "explain", held, "--namespace", "ml", "--format", "json", server_url=cluster.server_url
    ).stdout
    assert json.loads(explained)["binding"]["kind"] == "quota"
    client.cancel(holding)
    assert client.wait(held, WAIT)["state"] == "COMPLETED"  # the quota freed, it ran
    client.close()


def test_a_run_no_pool_can_fit_says_no_pool_can_start_a_worker_for_it(cluster, client, workflow_file):
    client.register_file(workflow_file(SOURCE))
    client.create_pool("small", "local", resources={"cpu": 4, "memory": "8Gi"}, min=0, max=2)
    wide = client.run("wide")["id"]
    note = eventually(lambda: client.execution(wide)["placement_note"], WAIT, "no round said why it waits")
    lead = "no pool can start a worker for it (pool small: cpu_available 4.0 < requested 64)"
    assert note == f"{lead}; 0/0 workers are available: no workers are registered."
    placement = client.placement(wide)
    assert placement["binding"] == {"kind": "no pool", "message": lead}
    assert placement["summary"] == note
    shown = flux("execution", "explain", wide, server_url=cluster.server_url, env=WIDE).stdout
    assert shown.splitlines()[0] == note
    assert client.show_pool("small")["desired"] == 0  # and nothing was started for it


def test_a_run_a_pool_can_start_a_worker_for_is_not_called_unplaceable(cluster, client, workflow_file):
    """No worker is registered, but a pool's template fits: the run waits for autoscaling,
    so it is not marked unschedulable and `flux workflow run` does not warn that it can
    never be placed; the pool starts a worker and the run completes on it."""
    client.create_pool("small", "local", resources={"cpu": 4, "memory": "8Gi"}, min=0, max=1)
    registered = {info["name"]: info for info in client.register_file(workflow_file(SOURCE))}
    assert registered["modest"]["warnings"] == []  # a pool can start a worker for it
    assert registered["wide"]["warnings"]  # no pool's template fits cpu=64: still warned
    ran = flux("workflow", "run", "modest", "--format", "json", server_url=cluster.server_url)
    assert ran.returncode == 0, ran.stderr
    assert "never be placed" not in ran.stderr
    modest = json.loads(ran.stdout)["id"]
    done = client.wait(modest, WAIT)
    assert (done["state"], done["output"]) == ("COMPLETED", "placed")
    events = [event["type"] for event in client.events(modest)]
    assert "WORKFLOW_UNSCHEDULABLE" not in events
