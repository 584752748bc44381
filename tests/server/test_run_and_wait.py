"""A run that waits in its own request (``POST /workflows/{name}/run?wait=``) and the
round a finished execution no longer kicks (docs/client.md#waiting-for-the-end,
docs/latency.md), on a real server and worker."""

from __future__ import annotations

import time

import httpx
import pytest
from protocol import metric
from shared import assert_error
from waiting import eventually, steady

import flux.client.sdk

pytestmark = pytest.mark.integration

SOURCE = """
    from flux import workflow

    @workflow
    async def echo(ctx):
        return ctx.input
"""


#: Placement rounds run so far (``metric`` reads a labelled series by its full name).
ROUNDS = 'flux_dispatch_round_seconds_count{part="total"}'


def test_a_run_that_waits_answers_with_its_end_in_one_request(cluster, client, workflow_file):
    client.register_file(workflow_file(SOURCE))
    cluster.start_worker("w", heartbeat_interval=5)
    eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") == 1, timeout=10)  # the worker's claim
    with httpx.Client(base_url=cluster.server_url, timeout=60) as http:
        reply = http.post("/workflows/echo/run", params={"wait": 30}, json={"input": 7})
    assert reply.status_code == 201
    assert (reply.json()["state"], reply.json()["output"]) == ("COMPLETED", 7)
    eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") == 1, timeout=10)  # the run's own is gone


def test_a_run_whose_wait_runs_out_answers_with_it_as_it_is(cluster, client, workflow_file):
    client.register_file(workflow_file(SOURCE))  # no worker: it stays queued
    with httpx.Client(base_url=cluster.server_url, timeout=60) as http:
        started = time.monotonic()
        reply = http.post("/workflows/echo/run", params={"wait": 0.5}, json={"input": 1})
        assert time.monotonic() - started >= 0.5
        assert reply.status_code == 201 and reply.json()["state"] == "SCHEDULED"
        assert http.get(f"/executions/{reply.json()['id']}").json()["state"] == "SCHEDULED"  # durable, not rolled back


@pytest.mark.parametrize("wait", ["-1", "301", "soon"])
def test_a_wait_out_of_bounds_is_refused_and_runs_nothing(cluster, client, workflow_file, wait):
    client.register_file(workflow_file(SOURCE))
    with httpx.Client(base_url=cluster.server_url, timeout=10) as http:
        body = assert_error(http.post("/workflows/echo/run", params={"wait": wait}, json={}), 422, "validation_error")
        assert body["errors"][0]["loc"] == ["query", "wait"]
    assert client.list_executions() == []


def test_the_client_waits_past_its_runs_own_request(cluster, client, workflow_file, monkeypatch):
    """Longer than ``RUN_WAIT``: the run's request ends with it queued, the wait goes on by its id."""
    monkeypatch.setattr(flux.client.sdk, "RUN_WAIT", 0.3)
    client.register_file(workflow_file(SOURCE))
    started = time.monotonic()
    assert client.run("echo", 2, wait=0.8)["state"] == "SCHEDULED"
    assert time.monotonic() - started >= 0.8
    cluster.start_worker("late", heartbeat_interval=5, wait=False)
    execution = client.run("echo", 3, wait=60)  # placed once the worker is up, past the run's own 0.3 s
    assert (execution["state"], execution["output"]) == ("COMPLETED", 3)


def test_a_finished_execution_kicks_no_round_when_nothing_waits(cluster, client, workflow_file):
    """One server, an empty queue: each run costs the round that places it, not a second
    one when it ends (``Dispatcher.freed``). What waits for a slot is still placed."""
    client.register_file(workflow_file(SOURCE))
    cluster.start_worker("w", heartbeat_interval=5, max_concurrent_executions=1)
    assert client.run("echo", 0, wait=30)["state"] == "COMPLETED"
    before = steady(lambda: metric(cluster.server_url, ROUNDS))  # the first run's rounds are over
    for i in range(3):
        assert client.run("echo", i, wait=30)["state"] == "COMPLETED"
    # once no round has run for a while, none that their ends could have kicked is still to come
    assert steady(lambda: metric(cluster.server_url, ROUNDS)) - before == 3

    queued = [client.run("echo", i) for i in range(4)]  # one slot: three wait for the ones before them
    for execution in queued:
        assert eventually(lambda: client.wait(execution["id"], 30)["state"] == "COMPLETED", timeout=40)
