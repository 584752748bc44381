"""A gang's failure paths on the server (docs/gangs.md#what-happens-on-each-failure),
through a real server and real workers in one rack: a member that never reaches the
rendezvous (``start_timeout``; its worker is a protocol worker the test speaks for),
cancelling a gang by its id, a member's id or while it waits, a member whose workflow
raises, a member preempted by a higher-priority single execution, and a gang whose
members' workers are killed until its ``max_attempts`` are spent. Each member's
workflow marks ``ran-RANK-ATTEMPT`` as its first statement, so a test sees which
members ran user code, and in which of their attempts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from protocol import ProtocolWorker
from waiting import ended, eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 90.0

SOURCE = """
import time
from pathlib import Path

from flux import Gang, task, workflow

MARKS = Path({marks!r})


def mark(name: str) -> None:
    with open(MARKS / name, "a") as f:
        f.write("x")


@task
def hold(rank: int, attempt: int, member: str) -> int:
    # waits for the test's go-ahead (a file), so that a member is running when the test acts
    mark(f"holding-{{rank}}-{{attempt}}-{{member}}")
    while not (MARKS / "go").exists():
        time.sleep(0.05)
    return rank


@workflow.with_options(gang=Gang(size=3, topology="rack", start_timeout="3s"), max_attempts=5)
async def hasty(ctx):
    mark(f"ran-{{ctx.gang.rank}}-{{ctx.attempt}}-{{ctx.execution_id}}")
    return ctx.gang.rank


@workflow.with_options(priority="low", gang=Gang(size=2, topology="rack"))
async def pair(ctx):
    mark(f"ran-{{ctx.gang.rank}}-{{ctx.attempt}}-{{ctx.execution_id}}")
    if ctx.input.get("raise") == ctx.gang.rank:
        raise ValueError(f"rank {{ctx.gang.rank}} gives up")
    return await hold(ctx.gang.rank, ctx.attempt, ctx.execution_id)


@workflow.with_options(priority="low", gang=Gang(size=2, topology="rack"), max_attempts=2)
async def fragile(ctx):
    mark(f"ran-{{ctx.gang.rank}}-{{ctx.attempt}}-{{ctx.execution_id}}")
    return await hold(ctx.gang.rank, ctx.attempt, ctx.execution_id)


@workflow.with_options(gang=Gang(size=3, topology="rack"))
async def trio(ctx):
    return ctx.gang.rank


@workflow.with_options(gang=Gang(size=2, topology="rack", start_timeout="10s"))
async def brisk(ctx):
    return ctx.gang.rank


@workflow.with_options(priority="high")
async def urgent(ctx):
    return "urgent"
"""


@pytest.fixture
def setup(make_cluster, workflow_file, marks):
    """A server (1 s preemption grace, 3 s eviction grace) with the workflows registered;
    each test starts its own workers, in rack a."""
    cluster = make_cluster(server_args=("--preemption-grace", "1"), eviction_grace_period=3)
    client = FluxClient(cluster.server_url)
    client.register_file(workflow_file(SOURCE.format(marks=str(marks))))
    yield cluster, client
    client.close()


def _workers(cluster, *names: str) -> None:  # noqa: ANN001
    for name in names:
        cluster.start_worker(name, labels={"rack": "a"}, max_concurrent_executions=1, wait=False)
    for name in names:
        cluster.wait_for_worker(name)


def _members(client: FluxClient, gang_id: str, placement: int = -1) -> list[dict]:
    """The members of one of the gang's placements (the last by default), by rank."""
    claimed = [e for e in client.events(gang_id) if e["type"] == "WORKFLOW_CLAIMED"]
    return [client.execution(m["execution"]) for m in claimed[placement]["value"]["members"]]


def _events(client: FluxClient, execution_id: str, type_: str) -> list[dict]:
    return [e for e in client.events(execution_id) if e["type"] == type_]


def _ran(marks: Path, kind: str = "ran", of: dict | None = None) -> set[tuple[int, int]]:
    """(rank, attempt) of each member that marked ``kind`` (user code ran; held), of one
    gang's (``of``) or of every one's."""
    ids = {m["id"] for m in of["members"]} if of else None
    found = [p.name.split("-")[1:] for p in marks.glob(f"{kind}-*")]
    return {(int(rank), int(attempt)) for rank, attempt, member in found if ids is None or member in ids}


def _holding(client: FluxClient, marks: Path, gang_id: str) -> list[dict]:
    """Wait until both members of the gang's last placement hold; returns them."""

    def holding() -> list[dict] | None:
        members = _members(client, gang_id) if _events(client, gang_id, "WORKFLOW_CLAIMED") else []
        held = _ran(marks, "holding", client.execution(gang_id))
        return members if members and all((m["rank"], m["attempt"]) in held for m in members) else None

    return eventually(holding, WAIT, f"the members of gang {gang_id} never all held")


def _flux(cluster, *args: str) -> subprocess.CompletedProcess:  # noqa: ANN001
    return subprocess.run(
        [sys.executable, "-m", "flux", *args, "--server-url", cluster.server_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_gang_whose_member_never_reaches_the_rendezvous_is_ended_and_placed_again_with_a_protocol_worker(
    setup, marks
):
    cluster, client = setup
    stuck = ProtocolWorker(cluster.server_url, cluster.home, "p1", heartbeat_interval=30, slots=1)
    try:
        stuck.register(labels={"rack": "a"})
        _workers(cluster, "a1", "a2")
        gang = client.run("hasty", {})
        job = eventually(
            lambda: stuck.claim(wait=2)["executions"], WAIT, "the protocol worker was never given a member"
        )
        assert job[0]["gang"]["gang_id"] == gang["id"]  # its member's job; it never posts the rendezvous
        attempt_ends = eventually(
            lambda: _events(client, gang["id"], "ATTEMPT_ENDED"), WAIT, "the late attempt never ended"
        )
        assert attempt_ends[0]["value"]["end"] == "start_timeout" and attempt_ends[0]["value"]["counted"] is True, (
            attempt_ends
        )
        assert f"member(s) {job[0]['gang']['rank']} did not start" in attempt_ends[0]["value"]["cause"]
        first = _members(client, gang["id"], 0)
        real = [m for m in first if m["worker_name"] != "p1"]
        assert len(real) == 2
        for member in real:  # told to stop as a preemption by the gang, and their attempts ended
            told = eventually(lambda m=member: _events(client, m["id"], "PREEMPTED"), WAIT, "a member was never told")
            assert told[0]["value"]["by"] == gang["id"]
            eventually(
                lambda m=member: _events(client, m["id"], "ATTEMPT_ENDED"), WAIT, "a real member's attempt never ended"
            )
        assert _ran(marks) == set(), "a member ran user code before every member arrived"
        assert client.execution(gang["id"])["state"] == "CLAIMED"  # p1 still holds its member
        # another gang's start deadline passes meanwhile: the late gang, still CLAIMED, is not ended twice
        other = client.run("brisk", {})
        assert ended(client, other["id"], WAIT)["state"] == "COMPLETED"
        deadline = _events(client, other["id"], "WORKFLOW_CLAIMED")[0]["time"] + 10
        time.sleep(max(0.0, deadline + 2 - time.time()))
        assert len(_events(client, gang["id"], "ATTEMPT_ENDED")) == 1
        assert client.execution(gang["id"])["crashes"] == 1
        stuck.post("/workers/p1/shutdown", {}).raise_for_status()  # the protocol worker leaves
    finally:
        stuck.close()
    _workers(cluster, "a3")
    done = ended(client, gang["id"], WAIT)
    assert done["state"] == "COMPLETED" and done["output"] == 0, (done["error"], done["placement_note"])
    assert done["crashes"] == 1  # the late start, counted once (p1's leaving afterwards is not counted again)
    attempt_ends = _events(client, gang["id"], "ATTEMPT_ENDED")
    assert [e["value"]["end"] for e in attempt_ends] == ["start_timeout"], attempt_ends
    assert _events(client, gang["id"], "WORKFLOW_RESCHEDULED")
    ran = _ran(marks)
    assert sorted(rank for rank, _ in ran) == [0, 1, 2] and all(attempt > 1 for _, attempt in ran), ran


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_cancelling_a_gang_by_its_id_a_members_id_or_while_it_waits_cancels_every_member(setup, marks):
    cluster, client = setup
    _workers(cluster, "a1", "a2")
    by_cli = client.run("pair", {})
    _holding(client, marks, by_cli["id"])
    cancelled = _flux(cluster, "execution", "cancel", by_cli["id"])
    assert cancelled.returncode == 0, cancelled.stderr
    done = ended(client, by_cli["id"], WAIT)
    assert done["state"] == "CANCELLED", done
    assert [m["state"] for m in _members(client, by_cli["id"])] == ["CANCELLED"] * 2

    by_member = client.run("pair", {})
    members = _holding(client, marks, by_member["id"])
    client.cancel(members[1]["id"])  # a member's id: its gang is cancelled
    assert ended(client, by_member["id"], WAIT)["state"] == "CANCELLED"
    assert [m["state"] for m in _members(client, by_member["id"])] == ["CANCELLED"] * 2

    waiting = client.run("trio", {})  # three members, two workers: it waits, SCHEDULED
    eventually(lambda: client.execution(waiting["id"])["placement_note"], WAIT, "the waiting gang was never looked at")
    assert client.execution(waiting["id"])["state"] == "SCHEDULED"
    assert client.cancel(waiting["id"])["state"] == "CANCELLED"  # at once: no worker holds it
    members = [client.execution(m["id"]) for m in client.execution(waiting["id"])["members"]]
    assert [m["state"] for m in members] == ["CANCELLED"] * 3
    assert _ran(marks, of=client.execution(by_cli["id"])) == {(0, 1), (1, 1)}  # once each, first attempt
    assert _ran(marks, of=client.execution(by_member["id"])) == {(0, 1), (1, 1)}
    assert _ran(marks, of=client.execution(waiting["id"])) == set()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_member_whose_workflow_raises_fails_the_gang_and_the_others_are_cancelled(setup, marks):
    cluster, client = setup
    _workers(cluster, "a1", "a2")
    gang = client.run("pair", {"raise": 1})
    done = ended(client, gang["id"], WAIT)
    assert done["state"] == "FAILED", done
    members = _members(client, gang["id"])
    assert done["error"].startswith(f"member 1 ({members[1]['id']}) failed"), done["error"]
    assert "rank 1 gives up" in done["error"]
    states = {m["rank"]: m["state"] for m in (client.execution(m["id"]) for m in members)}
    assert states[1] == "FAILED"
    eventually(lambda: client.execution(members[0]["id"])["state"] == "CANCELLED", WAIT, "rank 0 was never cancelled")
    assert done["crashes"] == 0 and done["attempt"] == 1  # a workflow's failure is no crash: not tried again


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_member_preempted_by_a_single_execution_ends_the_gangs_attempt_uncounted_and_it_completes_later(setup, marks):
    cluster, client = setup
    _workers(cluster, "a1", "a2")  # both taken by the gang: the urgent run must preempt one member
    gang = client.run("pair", {})
    _holding(client, marks, gang["id"])
    single = client.run("urgent", {})
    assert ended(client, single["id"], WAIT)["state"] == "COMPLETED"
    preempted = [p for m in _members(client, gang["id"], 0) for p in _events(client, m["id"], "PREEMPTED")]
    assert {p["value"]["by"] for p in preempted} == {single["id"], gang["id"]}, preempted  # one by it, one by the gang
    eventually(lambda: client.execution(gang["id"])["attempt"] >= 2, WAIT, "the gang was never placed again")
    (marks / "go").touch()
    done = ended(client, gang["id"], WAIT)
    assert done["state"] == "COMPLETED" and done["output"] == 0, (done["error"], done["placement_note"])
    assert done["crashes"] == 0  # a preemption is not counted against max_attempts
    attempt_ends = _events(client, gang["id"], "ATTEMPT_ENDED")
    assert [(e["value"]["end"], e["value"]["counted"]) for e in attempt_ends] == [("preempted", False)], attempt_ends
    assert single["id"] in attempt_ends[0]["value"]["cause"]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_gang_whose_members_workers_are_killed_past_max_attempts_fails_once_with_the_reason(setup, marks):
    cluster, client = setup
    _workers(cluster, "a1", "a2", "a3")
    gang = client.run("fragile", {})
    for attempt in (1, 2):
        members = _holding(client, marks, gang["id"])
        cluster.kill_worker(members[1]["worker_name"])
        if attempt == 1:
            eventually(lambda: client.execution(gang["id"])["attempt"] >= 2, WAIT, "the gang was never placed again")
    done = ended(client, gang["id"], WAIT)
    assert done["state"] == "FAILED", done
    assert "worker" in done["error"] and "(2 of 2 attempts crashed)" in done["error"], done["error"]
    assert done["crashes"] == 2
    assert len(_events(client, gang["id"], "WORKFLOW_FAILED")) == 1
    attempt_ends = _events(client, gang["id"], "ATTEMPT_ENDED")
    assert [(e["value"]["end"], e["value"]["counted"]) for e in attempt_ends] == [("worker_lost", True)] * 2, (
        attempt_ends
    )
    for member in client.execution(gang["id"])["members"]:
        assert member["state"] in ("CANCELLED", "FAILED"), member
