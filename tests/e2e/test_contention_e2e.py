"""Contention end to end (docs/contention.md), through a real server and real workers:
priorities, preemption (the victim replays elsewhere, exactly once), preemptible=False,
a victim's worker lost during the grace period, quotas and concurrency keys."""

from __future__ import annotations

import time

import pytest
from waiting import eventually

from flux.client import FluxClient, FluxClientError

pytestmark = pytest.mark.integration

WAIT = 60.0

SOURCE = """
import asyncio
from pathlib import Path

from flux import Concurrency, ResourceRequest, current_task, task, workflow

MARKS = Path({marks!r})
ACCEL = ResourceRequest(resources={{"accel": 1}})


def mark(name: str) -> None:
    with open(MARKS / name, "a") as f:
        f.write("x")


@task
async def first(label: str) -> str:
    mark(label + "-first")
    return label


@task
async def long(label: str, seconds: float) -> str:
    call = current_task()
    if call.attempt > 1:  # the replay: what completed is not run again, this runs again quickly
        return label
    for _ in range(int(seconds * 20)):
        if call.preempting:
            mark(label + "-saw-preempting")
        await asyncio.sleep(0.05)
    return label


@workflow.with_options(requests=ACCEL, priority="low")
async def low(ctx):
    await first(ctx.input["label"])
    return await long(ctx.input["label"], ctx.input.get("seconds", 60))


@workflow.with_options(requests=ACCEL, priority="low", preemptible=False)
async def steadfast(ctx):
    return await long(ctx.input["label"], ctx.input.get("seconds", 4))


@workflow.with_options(requests=ACCEL, priority="high")
async def high(ctx):
    return await first(ctx.input["label"])


@workflow.with_options(concurrency=Concurrency(key="customer:{{input.customer}}", limit=1))
async def per_customer(ctx):
    await asyncio.sleep(ctx.input["seconds"])
    return ctx.input["customer"]


@workflow.with_options(requests=ACCEL)
async def plain(ctx):
    await asyncio.sleep(ctx.input["seconds"])
    return "done"
"""


@pytest.fixture
def registered(make_cluster, workflow_file, marks):
    """A server with a 1 s preemption grace, the workflows registered, no worker yet."""
    cluster = make_cluster(server_args=("--preemption-grace", "1"), eviction_grace_period=3)
    client = FluxClient(cluster.server_url)
    client.register_file(workflow_file(SOURCE.format(marks=str(marks))))
    yield cluster, client
    client.close()


def _accel_worker(cluster, name: str, accel: int = 1) -> None:
    cluster.start_worker(
        name, max_concurrent_executions=4, extra_args=("--resource", f"accel={accel}", "--allocation", "reserve")
    )


def _events(client: FluxClient, execution_id: str, type_: str) -> list[dict]:
    return [e for e in client.events(execution_id) if e["type"] == type_]


def _state(client: FluxClient, execution_id: str, state: str) -> dict:
    return eventually(
        lambda: (e := client.execution(execution_id))["state"] == state and e, WAIT, f"{execution_id} never {state}"
    )


def test_a_preempted_execution_replays_elsewhere_and_completes_exactly_once(registered, marks):
    cluster, client = registered
    _accel_worker(cluster, "w1")
    low = client.run("low", {"label": "low"})
    _state(client, low["id"], "RUNNING")
    eventually(lambda: (marks / "low-first").exists(), WAIT, "the low execution's first task never ran")
    high = client.run("high", {"label": "high"})
    assert high["priority"] == 100 and high["priority_class"] == "high"
    done = _state(client, high["id"], "COMPLETED")
    assert done["worker_name"] == "w1"
    preempted = _events(client, low["id"], "PREEMPTED")
    assert preempted and preempted[0]["value"]["by"] == high["id"]
    assert _events(client, high["id"], "PREEMPTED")[0]["value"]["victims"] == [low["id"]]
    assert (marks / "low-saw-preempting").exists(), "the task never saw current_task().preempting"
    ended = [e["value"] for e in _events(client, low["id"], "ATTEMPT_ENDED") if e["value"]["end"] == "preempted"]
    assert ended and ended[0]["counted"] is False
    _accel_worker(cluster, "w2")
    finished = _state(client, low["id"], "COMPLETED")
    assert finished["crashes"] == 0 and finished["output"] == "low"
    assert (marks / "low-first").read_text() == "x", "a completed task ran again"
    assert finished["priority"] == -100


def test_a_non_preemptible_execution_is_never_chosen(registered):
    cluster, client = registered
    _accel_worker(cluster, "w1")
    steady = client.run("steadfast", {"label": "steady", "seconds": 8})
    _state(client, steady["id"], "RUNNING")
    high = client.run("high", {"label": "high"})
    # a round has weighed it: it holds room and waits instead of preempting
    waiting = eventually(
        lambda: (e := client.execution(high["id"]))["placement_note"] and "room is held" in e["placement_note"] and e,
        WAIT,
        "no round held room for it",
    )
    assert waiting["state"] == "SCHEDULED" and "room is held for it on worker w1" in waiting["placement_note"]
    assert not _events(client, steady["id"], "PREEMPTED")
    _state(client, high["id"], "COMPLETED")
    assert _state(client, steady["id"], "COMPLETED")["output"] == "steady"
    assert not _events(client, steady["id"], "PREEMPTED")


def test_a_victim_whose_worker_is_lost_during_the_grace_period_is_requeued_as_any_lost_attempt(
    make_cluster, workflow_file, marks
):
    cluster = make_cluster(server_args=("--preemption-grace", "30"), eviction_grace_period=2)
    client = FluxClient(cluster.server_url)
    client.register_file(workflow_file(SOURCE.format(marks=str(marks))))
    _accel_worker(cluster, "w1")
    low = client.run("low", {"label": "low"})
    _state(client, low["id"], "RUNNING")
    high = client.run("high", {"label": "high"})
    eventually(lambda: _events(client, low["id"], "PREEMPTED"), WAIT, "never preempted")
    assert low["id"] in client.placement(high["id"])["queue"]["preempting"]  # whom it preempts, and when
    assert client.placement(low["id"])["queue"]["preempted_by"] == high["id"]
    cluster.kill_worker("w1")
    _accel_worker(cluster, "w2")
    _state(client, high["id"], "COMPLETED")
    finished = _state(client, low["id"], "COMPLETED")
    ends = [e["value"]["end"] for e in _events(client, low["id"], "ATTEMPT_ENDED")]
    assert "worker_lost" in ends and finished["crashes"] == 1
    assert (marks / "low-first").read_text() == "x"
    client.close()


def test_priority_order_when_a_slot_frees(registered):
    cluster, client = registered
    first = client.run("plain", {"seconds": 2})
    low = client.run("plain", {"seconds": 0}, priority="batch")
    high = client.run("plain", {"seconds": 0}, priority=500)
    _accel_worker(cluster, "w1")
    for execution in (first, low, high):
        _state(client, execution["id"], "COMPLETED")
    started = {e["id"]: client.execution(e["id"])["claimed_at"] for e in (low, high)}
    assert started[high["id"]] < started[low["id"]]


def test_a_namespace_never_holds_more_than_its_quota(make_cluster, workflow_file, marks):
    cluster = make_cluster()
    admin = FluxClient(cluster.server_url)
    admin.create_namespace("ml")
    detail = admin.update_namespace("ml", quota={"resources.accel": 1, "executions": 5})
    assert detail["quota"] == {"accel": 1, "executions": 5}
    client = FluxClient(cluster.server_url, namespace="ml")
    client.register_file(workflow_file(SOURCE.format(marks=str(marks))))
    _accel_worker(cluster, "w1", accel=3)
    runs = [client.run("plain", {"seconds": 1}) for _ in range(3)]
    note = eventually(
        lambda: (
            "quota" in (client.execution(runs[2]["id"])["placement_note"] or "")
            and client.execution(runs[2]["id"])["placement_note"]
        ),
        WAIT,
        "no quota note",
    )
    assert "held by namespace ml's quota: accel 1/1 in use" in note
    deadline = time.monotonic() + WAIT
    ids = {r["id"] for r in runs}
    while True:  # one read per sample: a read per execution counted one that ended and the next one claimed as two
        listed = [e for e in client.list_executions(limit=100) if e["id"] in ids]
        assert len([e for e in listed if e["state"] in ("CLAIMED", "RUNNING")]) <= 1
        if all(e["state"] == "COMPLETED" for e in listed) and len(listed) == len(ids):
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    held = sorted((e["claimed_at"], e["finished_at"]) for e in map(client.execution, ids))
    assert all(ended <= claimed for (_, ended), (claimed, _) in zip(held, held[1:])), held  # never two at once
    with pytest.raises(FluxClientError) as refused:
        admin.update_namespace("ml", quota={"cpu": "lots"})
    assert refused.value.status == 422
    admin.close()
    client.close()


def test_a_concurrency_key_holds_at_most_its_limit(registered):
    cluster, client = registered
    cluster.start_worker("w1", max_concurrent_executions=4)
    a1 = client.run("per_customer", {"customer": "a", "seconds": 1.5})
    a2 = client.run("per_customer", {"customer": "a", "seconds": 0})
    b = client.run("per_customer", {"customer": "b", "seconds": 0})
    assert a1["concurrency"] == [{"key": "customer:a", "limit": 1}]
    _state(client, b["id"], "COMPLETED")
    assert client.execution(a1["id"])["state"] in ("CLAIMED", "RUNNING")
    assert client.execution(a2["id"])["state"] == "SCHEDULED"
    assert "held by concurrency key 'customer:a': at its limit" in client.execution(a2["id"])["placement_note"]
    done = [_state(client, e["id"], "COMPLETED") for e in (a1, a2)]
    assert done[1]["claimed_at"] >= done[0]["finished_at"] - 0.05
    with pytest.raises(FluxClientError) as refused:
        client.run("per_customer", {"seconds": 0})
    assert refused.value.status == 422 and "input.customer" in str(refused.value)


def test_the_cli_sets_quotas_weights_and_priorities_and_explain_and_metrics_show_them(registered):
    from shared import flux

    cluster, client = registered
    url = cluster.server_url
    flux("namespace", "create", "ml", server_url=url)
    shown = flux(
        "namespace",
        "quota",
        "ml",
        "cpu=16",
        "memory=64Gi",
        "gpu=4",
        "executions=100",
        "resources.fpga=2",
        "--format",
        "json",
        server_url=url,
    )
    assert '"fpga": 2' in shown.stdout and '"executions": 100' in shown.stdout
    assert '"weight": 2.0' in flux("namespace", "set", "ml", "--weight", "2", "--format", "json", server_url=url).stdout
    bad = flux("namespace", "quota", "ml", "cpu", server_url=url, check=False)
    assert bad.returncode != 0 and "NAME=VALUE" in bad.stderr
    run = flux(
        "workflow", "run", "plain", '{"seconds": 0}', "--priority", "critical", "--format", "json", server_url=url
    )
    execution_id = __import__("json").loads(run.stdout)["id"]
    explained = flux("execution", "explain", execution_id, server_url=url).stdout
    assert "priority: 1000 (critical); position 1 in its namespace's queue" in explained
    unknown = flux("workflow", "run", "plain", "--priority", "urgent", server_url=url, check=False)
    assert unknown.returncode != 0 and "unknown priority class 'urgent'" in unknown.stderr
    metrics = __import__("httpx").get(f"{url}/metrics").text
    assert 'flux_pending_executions{namespace="default",priority="1000"} 1.0' in metrics
    assert 'flux_quota_limit{namespace="ml",resource="fpga"} 2.0' in metrics


CALLS = """
from flux import call, workflow


@workflow
async def child(ctx):
    return ctx.input


@workflow.with_options(priority="high")
async def parent(ctx):
    return await call(child, 1)
"""


def test_a_schedules_runs_take_its_priority_and_a_calls_child_inherits_its_parents(make_cluster, workflow_file):
    cluster = make_cluster()
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(CALLS, "calls.py"))
        schedule = client.create_schedule("nightly", "child", every="1h", priority="batch", paused=True)
        assert schedule["priority"] == "batch"
        assert client.trigger_schedule("nightly")["priority"] == -1000
        cluster.start_worker("w1")
        parent = client.run("parent", None, wait=60)
        assert parent["state"] == "COMPLETED" and parent["priority"] == 100
        child = client.execution(client.execution(parent["id"])["children"][0])
        assert (child["priority"], child["priority_class"]) == (100, "high")
