"""Dynamic routing and affinity operators through real server and worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1]

ROUTED = """
    from flux import In, NotIn, label, metric, score, task, workflow

    @task
    async def where():
        return "ok"

    @workflow.with_options(routing=score((label("zone") == "b") * 10))
    async def prefers_b(ctx):
        return await where()

    @workflow.with_options(affinity={"zone": In("a", "c")}, routing=score((label("zone") == "b") * 100))
    async def prefers_b_but_needs_a(ctx):
        return await where()

    @workflow.with_options(routing=score(metric("queue_depth") * -1))
    async def shortest_queue(ctx):
        return await where()

    @workflow.with_options(affinity={"zone": NotIn("a")})
    async def anywhere_but_a(ctx):
        return await where()
"""


@pytest.fixture
def routed(cluster, client, workflow_file, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    client.register_file(workflow_file(ROUTED))
    cluster.start_worker("wa", labels={"zone": "a"}, extra_args=("--metrics-provider", "metrics_providers:deep"))
    cluster.start_worker("wb", labels={"zone": "b"}, extra_args=("--metrics-provider", "metrics_providers:shallow"))
    return client


def test_routing_picks_the_higher_scored_worker_and_says_why(routed):
    for _ in range(3):
        execution = routed.run("prefers_b", None, wait=30)
        assert execution["worker_name"] == "wb"
    claimed = next(e for e in routed.events(execution["id"]) if e["type"] == "WORKFLOW_CLAIMED")
    assert claimed["value"]["reason"].startswith("highest score 10 of 2 eligible")


def test_routing_never_picks_an_ineligible_worker(routed):
    assert {routed.run("prefers_b_but_needs_a", None, wait=30)["worker_name"] for _ in range(3)} == {"wa"}


def test_routing_reads_live_metrics_from_heartbeats(routed):
    assert routed.run("shortest_queue", None, wait=30)["worker_name"] == "wb"


def test_not_in_affinity_excludes_a_label_value(routed):
    assert routed.run("anywhere_but_a", None, wait=30)["worker_name"] == "wb"


def test_routing_and_operator_affinity_are_stored_with_the_workflow(routed):
    shown = routed.show_workflow("prefers_b_but_needs_a")
    assert shown["affinity"] == {"zone": {"op": "In", "values": ["a", "c"]}}
    assert shown["routing"] == {"terms": [{"kind": "label_eq", "key": "zone", "value": "b", "weight": 100}]}
