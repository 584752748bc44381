"""Fair share that remembers, and work picked up at once after a server restart
(docs/contention.md), through real server and worker processes: a server SIGKILLed and
started again on the same port and database. Orders and latencies are read from the
events the server recorded; the outage itself is the only wait of a fixed length."""

from __future__ import annotations

import signal
import time

import pytest
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 60.0
#: How long the server stays down: the worker's loops back off up to 10 s each.
OUTAGE = 10.0
#: A claim that waited out a loop's own backoff would take seconds (a hang-catcher, not a speed figure).
PICKED_UP = 5.0

SOURCE = """
import asyncio
from pathlib import Path

from flux import workflow

MARKS = Path({marks!r})


@workflow
async def night(ctx):
    while not (MARKS / "morning").exists():
        await asyncio.sleep(0.05)
    return "slept"


@workflow
async def quick(ctx):
    return ctx.input
"""


def _restart(cluster) -> None:
    cluster.stop_server(signal.SIGKILL)
    cluster.start_server()


def _event(client: FluxClient, execution_id: str, type_: str) -> dict:
    found = [e for e in client.events(execution_id) if e["type"] == type_]
    return found[-1]


def _two_teams(cluster, workflow_file, marks) -> tuple[FluxClient, FluxClient]:
    """Namespaces owls and larks with the workflows registered, and one worker of one slot."""
    source = workflow_file(SOURCE.format(marks=str(marks)))
    with FluxClient(cluster.server_url) as admin:
        for name in ("owls", "larks"):
            admin.create_namespace(name)
    owls, larks = FluxClient(cluster.server_url, namespace="owls"), FluxClient(cluster.server_url, namespace="larks")
    for client in (owls, larks):
        client.register_file(source)
    cluster.start_worker("w1", max_concurrent_executions=1)
    return owls, larks


def test_decayed_usage_reorders_two_namespaces_after_one_held_the_fleet_alone_across_a_restart(
    make_cluster, workflow_file, marks
):
    cluster = make_cluster(server_args=("--fair-share-half-life", "1h"), eviction_grace_period=5)
    owls, larks = _two_teams(cluster, workflow_file, marks)
    held = owls.run("night", None)  # the owls hold the whole fleet, alone
    eventually(lambda: owls.show_namespace()["usage_share"] > 0, WAIT, "the owls' usage never accrued")
    _restart(cluster)
    shown = owls.show_namespace()
    assert shown["usage_share"] > 0 and shown["fair_share_half_life"] == 3600
    assert larks.show_namespace()["usage_share"] == 0
    # both wait behind the night's work: the owls asked first, and hold nothing once it ends
    first = owls.run("quick", "owls")
    second = larks.run("quick", "larks")
    (marks / "morning").touch()
    eventually(lambda: owls.execution(held["id"])["state"] == "COMPLETED", WAIT, "the night never ended")
    for client, execution in ((owls, first), (larks, second)):
        eventually(lambda: client.execution(execution["id"])["state"] == "COMPLETED", WAIT, "never ran")
    claimed = {
        "owls": _event(owls, first["id"], "WORKFLOW_CLAIMED")["time"],
        "larks": _event(larks, second["id"], "WORKFLOW_CLAIMED")["time"],
    }
    assert claimed["larks"] < claimed["owls"], claimed  # the team that had nothing goes first
    owls.close()
    larks.close()


def test_without_a_half_life_the_same_queue_is_placed_first_come_first_served(make_cluster, workflow_file, marks):
    cluster = make_cluster(server_args=("--fair-share-half-life", "0"), eviction_grace_period=5)
    owls, larks = _two_teams(cluster, workflow_file, marks)
    held = owls.run("night", None)
    eventually(lambda: owls.execution(held["id"])["state"] == "RUNNING", WAIT, "the night never started")
    first = owls.run("quick", "owls")
    second = larks.run("quick", "larks")
    (marks / "morning").touch()
    for client, execution in ((owls, first), (larks, second)):
        eventually(lambda: client.execution(execution["id"])["state"] == "COMPLETED", WAIT, "never ran")
    assert owls.show_namespace()["usage_share"] == 0
    owls_at = _event(owls, first["id"], "WORKFLOW_CLAIMED")["time"]
    assert owls_at < _event(larks, second["id"], "WORKFLOW_CLAIMED")["time"]
    owls.close()
    larks.close()


def test_a_worker_claims_at_once_after_a_ten_second_outage(make_cluster, workflow_file, marks):
    cluster = make_cluster(eviction_grace_period=30)
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(SOURCE.format(marks=str(marks))))
        cluster.start_worker("w1", max_concurrent_executions=2)
        cluster.stop_server(signal.SIGKILL)
        time.sleep(OUTAGE)  # the outage itself: every loop of the worker backs off meanwhile
        cluster.start_server()
        execution = client.run("quick", "back")
        eventually(lambda: client.execution(execution["id"])["state"] == "COMPLETED", WAIT, "never ran")
        claimed = _event(client, execution["id"], "WORKFLOW_CLAIMED")["time"]
        started = _event(client, execution["id"], "WORKFLOW_STARTED")["time"]
        assert started - claimed < PICKED_UP, (claimed, started)
        assert "reachable again" in cluster.log("worker-w1")


def test_replicas_on_postgresql_share_one_usage_and_never_count_a_second_twice(replicas, workflow_file, marks):
    """Both replicas accrue the same row from its own timestamp: what one fleet slot held for
    t seconds is at most t slot-seconds, however many replicas added to it."""
    first, second = replicas
    source = workflow_file(SOURCE.format(marks=str(marks)))
    with FluxClient(first.server_url) as admin:
        admin.create_namespace("owls")
    owls = FluxClient(first.server_url, namespace="owls")
    owls.register_file(source)
    first.start_worker("w1", max_concurrent_executions=1)
    held = owls.run("night", None)
    running = eventually(lambda: (e := owls.execution(held["id"]))["state"] == "RUNNING" and e, WAIT, "never ran")
    with FluxClient(second.server_url, namespace="owls") as other:
        usage = eventually(
            lambda: (u := other.show_namespace()["usage"]).get("<slots>", 0) > 6 and u, WAIT, "usage never grew"
        )
        assert usage["<slots>"] <= time.time() - running["claimed_at"] + 1, usage
    (marks / "morning").touch()
    owls.close()
