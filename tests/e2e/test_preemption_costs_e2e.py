"""Preemption that wastes nothing it need not (docs/contention.md), through a real server and
real workers: a preemption withdrawn when its preemptor went elsewhere, victims chosen by
the work they lose, ``min_runtime`` and the cooldown honoured. Every verdict is read from
the events the server recorded, never from how long anything took."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from protocol import metric
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 60.0

SOURCE = """
import asyncio
from pathlib import Path

from flux import ResourceRequest, current_task, task, workflow

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
async def gate(label: str) -> str:
    while not (MARKS / (label + "-go")).exists():
        await asyncio.sleep(0.05)
    return label


@task
async def hold(label: str) -> str:
    seen = False
    while not (MARKS / (label + "-done")).exists():
        preempting = current_task().preempting
        if preempting and not seen:
            mark(label + "-saw-preempting")
        elif seen and not preempting:
            mark(label + "-saw-withdrawn")
        seen = bool(preempting)
        await asyncio.sleep(0.05)
    return label


async def body(ctx):
    label = ctx.input["label"]
    await first(label)
    if ctx.input.get("gate"):
        await gate(label)
    return await hold(label)


@workflow.with_options(requests=ACCEL, priority="low")
async def low(ctx):
    return await body(ctx)


@workflow.with_options(requests=ACCEL, priority="low", min_runtime="10m")
async def patient(ctx):
    return await body(ctx)


@workflow.with_options(requests=ACCEL, priority="high")
async def high(ctx):
    return await first(ctx.input["label"])


@workflow.with_options(requests=ResourceRequest(resources={{"accel": 2}}), priority="high")
async def wide(ctx):
    return await first(ctx.input["label"])
"""


def _cluster(make_cluster, workflow_file, marks: Path, grace: float):
    cluster = make_cluster(server_args=("--preemption-grace", str(grace)), eviction_grace_period=3)
    client = FluxClient(cluster.server_url)
    client.register_file(workflow_file(SOURCE.format(marks=str(marks))))
    return cluster, client


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


def _running(client: FluxClient, marks: Path, workflow: str, label: str, **input) -> str:
    """Start ``workflow`` and wait until its first task ran."""
    execution = client.run(workflow, {"label": label, **input})
    eventually(lambda: (marks / f"{label}-first").exists(), WAIT, f"{label} never ran its first task")
    return execution["id"]


def _victims(client: FluxClient, preemptor: str) -> list[str]:
    found = eventually(lambda: _events(client, preemptor, "PREEMPTED"), WAIT, f"{preemptor} never preempted")
    return found[0]["value"]["victims"]


def test_a_victim_whose_preemptor_was_placed_elsewhere_keeps_running_and_completes_with_one_attempt(
    make_cluster, workflow_file, marks
):
    cluster, client = _cluster(make_cluster, workflow_file, marks, grace=10)
    _accel_worker(cluster, "w1")
    low = _running(client, marks, "low", "low")
    high = client.run("high", {"label": "high"})
    assert _victims(client, high["id"]) == [low]
    deadline = _events(client, low, "PREEMPTED")[0]["value"]["deadline"]
    eventually(lambda: (marks / "low-saw-preempting").exists(), WAIT, "the task never saw its preemption")
    _accel_worker(cluster, "w2")  # frees up during the grace period: the preemptor goes there
    assert _state(client, high["id"], "COMPLETED")["worker_name"] == "w2"
    withdrawn = eventually(lambda: _events(client, low, "PREEMPTION_WITHDRAWN"), WAIT, "never withdrawn")
    assert withdrawn[0]["value"]["by"] == high["id"] and withdrawn[0]["value"]["worker"] == "w1"
    eventually(lambda: (marks / "low-saw-withdrawn").exists(), WAIT, "current_task().preempting stayed set")
    placement = client.placement(low)["queue"]
    assert placement["preempted_by"] is None and placement["preempt_deadline"] is None
    # past the deadline the preemption had: the attempt goes on all the same
    eventually(lambda: time.time() > deadline + 2, WAIT, "the clock stood still")
    assert client.execution(low)["state"] == "RUNNING"
    (marks / "low-done").touch()
    done = _state(client, low, "COMPLETED")
    assert done["attempt"] == 1 and done["worker_name"] == "w1"
    assert not [e for e in _events(client, low, "ATTEMPT_ENDED") if e["value"]["end"] == "preempted"]
    assert done["preemption_lost_seconds"] == 0
    client.close()


def test_the_victim_is_the_one_with_the_least_work_since_its_last_completed_task(make_cluster, workflow_file, marks):
    cluster, client = _cluster(make_cluster, workflow_file, marks, grace=1)
    _accel_worker(cluster, "w1", accel=2)
    older = _running(client, marks, "low", "older", gate=True)  # claimed first, then waits at its gate
    younger = _running(client, marks, "low", "younger")  # the youngest attempt: today's victim
    (marks / "older-go").touch()  # the older one completes a task now: little work since
    eventually(
        lambda: any(e["task_id"] and "gate" in e["task_id"] for e in _events(client, older, "TASK_COMPLETED")),
        WAIT,
        "the gate never completed",
    )
    high = client.run("high", {"label": "high"})
    assert _victims(client, high["id"]) == [older]
    assert _state(client, high["id"], "COMPLETED")["worker_name"] == "w1"
    ended = eventually(lambda: _events(client, older, "ATTEMPT_ENDED"), WAIT, "the victim's attempt never ended")
    assert ended[0]["value"]["end"] == "preempted"
    lost = _state(client, older, "RUNNING")["preemption_lost_seconds"]  # replayed on w1 after the preemptor
    assert lost > 0
    assert client.execution(younger)["attempt"] == 1
    assert client.show_namespace()["preemption_lost_seconds"] >= lost
    assert metric(cluster.server_url, "flux_preemption_lost_seconds_total") == pytest.approx(lost)
    (marks / "older-done").touch()
    (marks / "younger-done").touch()
    assert (marks / "older-first").read_text() == "x", "a completed task ran again"
    client.close()


def test_an_attempt_within_its_min_runtime_is_chosen_only_when_nothing_else_would_do(
    make_cluster, workflow_file, marks
):
    cluster, client = _cluster(make_cluster, workflow_file, marks, grace=1)
    _accel_worker(cluster, "w1", accel=2)
    older = _running(client, marks, "low", "older")
    patient = _running(client, marks, "patient", "patient")  # the youngest, the least work: protected
    assert client.execution(patient)["min_runtime"] == 600
    high = client.run("high", {"label": "high"})
    assert _victims(client, high["id"]) == [older]
    _state(client, high["id"], "COMPLETED")
    # with only the protected one left to free the room, it is chosen after all
    (marks / "older-done").touch()
    _state(client, older, "COMPLETED")
    wide = client.run("wide", {"label": "wide"})  # needs both: the patient one must leave
    assert _victims(client, wide["id"]) == [patient]
    _state(client, wide["id"], "COMPLETED")
    (marks / "patient-done").touch()
    _state(client, patient, "COMPLETED")
    client.close()


def test_an_execution_preempted_within_the_cooldown_is_not_chosen_again_while_another_frees_the_room(
    make_cluster, workflow_file, marks
):
    cluster, client = _cluster(make_cluster, workflow_file, marks, grace=1)
    _accel_worker(cluster, "w1", accel=2)
    steady = _running(client, marks, "low", "steady")
    bounced = _running(client, marks, "low", "bounced")
    first = client.run("high", {"label": "h1"})
    assert _victims(client, first["id"]) == [bounced]  # the youngest, the least work
    _state(client, first["id"], "COMPLETED")
    eventually(lambda: client.execution(bounced)["attempt"] == 2, WAIT, "the victim never ran again")
    _state(client, bounced, "RUNNING")  # again the youngest attempt with the least work, but cooling down
    second = client.run("high", {"label": "h2"})
    assert _victims(client, second["id"]) == [steady]
    assert len(_events(client, bounced, "PREEMPTED")) == 1
    _state(client, second["id"], "COMPLETED")
    for label in ("steady", "bounced"):
        (marks / f"{label}-done").touch()
    _state(client, bounced, "COMPLETED")
    client.close()
