"""An attempt preempted before its worker came for it (docs/contention.md, "Withdrawal"):
the claim that hands it over carries its notice, and once its deadline has passed it is
not handed over at all but ends as preempted. A real server; the worker is a
``ProtocolWorker`` (tests/protocol.py), since the point is a claim withheld until the test
says so, which no real worker does."""

from __future__ import annotations

import time

import pytest
from protocol import ProtocolWorker
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 30.0

SOURCE = """
from flux import workflow


@workflow.with_options(priority="low")
async def low(ctx):
    return "low"


@workflow.with_options(priority="high")
async def high(ctx):
    return "high"
"""


@pytest.fixture
def preempted(make_cluster, workflow_file):
    """A low execution placed on a worker that has not claimed it, then preempted by a high one."""
    cluster = make_cluster(server_args=("--preemption-grace", "2"))
    client = FluxClient(cluster.server_url)
    client.register_file(workflow_file(SOURCE))
    worker = ProtocolWorker(cluster.server_url, cluster.home, "slow", heartbeat_interval=30, slots=1)
    worker.register()
    low = client.run("low", None)
    eventually(lambda: client.execution(low["id"])["state"] == "CLAIMED", WAIT, "never placed")
    high = client.run("high", None)
    notice = eventually(
        lambda: [e for e in client.events(low["id"]) if e["type"] == "PREEMPTED"], WAIT, "never preempted"
    )[0]
    yield client, worker, low["id"], high["id"], notice["value"]["deadline"]
    worker.close()
    client.close()


def test_a_claim_that_hands_over_an_attempt_already_preempted_carries_its_notice_with_a_protocol_worker(preempted):
    client, worker, low, _, deadline = preempted
    reply = worker.claim(wait=0)
    assert [job["id"] for job in reply["executions"]] == [low]
    assert [(n["execution_id"], n["attempt"]) for n in reply["preempt"]] == [(low, 1)]
    assert 0 < reply["preempt"][0]["seconds"] <= 2
    assert time.time() < deadline


def test_an_attempt_whose_preemption_deadline_passed_is_not_handed_over_but_ends_preempted_with_a_protocol_worker(
    preempted,
):
    client, worker, low, high, deadline = preempted
    eventually(lambda: time.time() > deadline, WAIT, "the clock stood still")
    reply = worker.claim(wait=0)
    assert low not in [job["id"] for job in reply["executions"]]
    ended = [e["value"] for e in client.events(low) if e["type"] == "ATTEMPT_ENDED"]
    assert ended and ended[0]["end"] == "preempted" and ended[0]["counted"] is False
    assert not [e for e in client.events(low) if e["type"] == "WORKFLOW_STARTED"]
    assert client.execution(low)["preemption_lost_seconds"] == 0  # it never started: nothing lost
    # the slot it held is the preemptor's now
    jobs = eventually(lambda: worker.claim(wait=1)["executions"], WAIT, "the preemptor never came")
    assert [job["id"] for job in jobs] == [high]
