"""A submission to a fleet with room is placed by a round in its own transaction
(``Dispatcher.place_with``, docs/latency.md): one commit from POST to a claimed
execution, delivered to the claim that waits. Work that does not fit stays queued,
explained, and what follows goes the dispatcher's way, as before."""

from __future__ import annotations

import pytest

from flux.client import FluxClient
from flux.local import LocalCluster
from protocol import ProtocolWorker, metric
from waiting import eventually

pytestmark = pytest.mark.integration

SOURCE = """
    from flux import ResourceRequest, workflow

    @workflow
    async def small(ctx):
        return ctx.input

    @workflow.with_options(requests=ResourceRequest(cpu=512))
    async def huge(ctx):
        return ctx.input
"""


def rounds(server_url: str, outcome: str) -> float:
    try:
        return metric(server_url, f'flux_submission_rounds_total{{outcome="{outcome}"}}')
    except KeyError:
        return 0.0


@pytest.fixture(params=["sqlite", "postgresql"])
def either(request, make_cluster) -> LocalCluster:
    """A server on SQLite, or on PostgreSQL (its savepoint, its placement lock)."""
    if request.param == "sqlite":
        return make_cluster()
    return make_cluster(database_url=request.getfixturevalue("pg_url"))


def test_a_submission_to_a_fleet_with_room_is_claimed_in_its_own_transaction(either, workflow_file):
    cluster = either
    with FluxClient(cluster.server_url) as client:
        placed_in_own_round(cluster, client, workflow_file)


def placed_in_own_round(cluster: LocalCluster, client: FluxClient, workflow_file) -> None:  # noqa: ANN001
    client.register_file(workflow_file(SOURCE))
    worker = ProtocolWorker.ready(cluster.server_url, cluster.home, "roomy")
    try:
        thread, result = worker.claim_in_background(wait=20)
        eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") >= 1, timeout=10)
        placed = rounds(cluster.server_url, "placed")
        execution = client.run("small", 7)
        thread.join(timeout=25)
        assert [job["id"] for job in result["reply"]["executions"]] == [execution["id"]]
        assert rounds(cluster.server_url, "placed") == placed + 1
        shown = client.execution(execution["id"])
        assert shown["state"] == "CLAIMED" and shown["worker_name"] == "roomy"
        types = [event["type"] for event in client.events(execution["id"])]
        assert types[:3] == ["WORKFLOW_SCHEDULED", "WORKFLOW_CLAIMED", "ATTEMPT_STARTED"]
    finally:
        worker.close()


def test_what_does_not_fit_waits_explained_and_the_dispatcher_places_what_follows(cluster, client, workflow_file):
    client.register_file(workflow_file(SOURCE))
    worker = ProtocolWorker(cluster.server_url, cluster.home, "modest", heartbeat_interval=5)
    try:
        worker.register()
        waiting = rounds(cluster.server_url, "waiting")
        huge = client.run("huge", 1)
        assert rounds(cluster.server_url, "waiting") == waiting + 1
        assert eventually(lambda: client.execution(huge["id"])["placement_note"], timeout=10)
        assert client.execution(huge["id"])["state"] == "SCHEDULED"
        inline = rounds(cluster.server_url, "placed") + rounds(cluster.server_url, "waiting")
        small = client.run("small", 2)  # a backlog waits: the dispatcher's round places it
        assert eventually(lambda: worker.claim(wait=1)["executions"], timeout=10)[0]["id"] == small["id"]
        assert rounds(cluster.server_url, "placed") + rounds(cluster.server_url, "waiting") == inline
        assert rounds(cluster.server_url, "failed") == 0
    finally:
        worker.close()
