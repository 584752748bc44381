"""A gang member's worker side (docs/gangs.md#on-the-worker), through a real server and
real workers: the environment and ``ctx.gang`` reach user code (rank 0 binds the port its
worker reserved), no member's code runs until its peers arrived (one worker is stopped
with SIGSTOP and resumed), and a member whose gang's attempt ended at the rendezvous (a
409, or a preemption notice, whichever the server gives first) never runs user code. The
gang as a whole (racks, failures, replay): ``test_gangs_e2e.py``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from waiting import ended, eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

WAIT = 90.0

SOURCE = """
import json
import os
import socket
import time
from pathlib import Path

from flux import Gang, task, workflow

MARKS = Path({marks!r})
KEYS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def seen(ctx) -> dict:
    # what this member's user code sees; marked once per rank and attempt that ran it
    gang = ctx.gang
    (MARKS / f"ran-{{gang.rank}}-{{ctx.attempt}}").write_text(str(time.time()))
    return {{
        "rank": gang.rank,
        "local": [gang.local_rank, gang.local_size],
        "env": {{key: os.environ.get(key) for key in KEYS}},
        "gang_env": gang.env(),
        "master": [gang.master_addr, gang.master_port],
        "members": [[m.rank, m.worker, m.address] for m in gang.members],
    }}


@task
def meet(report: dict) -> list:
    # rank 0 listens on MASTER_PORT (its worker held it until now); the others send what they saw
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    if rank == 0:
        with socket.create_server(address) as server:
            server.settimeout(60)
            reports = [report]
            for _ in range(size - 1):
                peer = server.accept()[0]
                with peer, peer.makefile() as lines:
                    reports.append(json.loads(lines.readline()))
            return sorted(reports, key=lambda r: r["rank"])
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(address, timeout=5) as connection:
                connection.sendall(json.dumps(report).encode() + b"\\n")
                return []
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@workflow.with_options(gang=Gang(size=2, topology="rack", per_worker=2))
async def together(ctx):
    return await meet(seen(ctx))


@workflow.with_options(gang=Gang(size=2, topology="rack"))
async def apart(ctx):
    return await meet(seen(ctx))


@workflow.with_options(gang=Gang(size=2, topology="rack", start_timeout="3s"), max_attempts=20)
async def hasty(ctx):
    return await meet(seen(ctx))
"""


@pytest.fixture
def setup(make_cluster, workflow_file, marks):
    """A server with the workflows registered (each test starts its workers, in rack a)."""
    cluster = make_cluster()
    client = FluxClient(cluster.server_url)
    client.register_file(workflow_file(SOURCE.format(marks=str(marks))))
    yield cluster, client
    client.close()


def _ran(marks: Path) -> dict[tuple[int, int], float]:
    """(rank, attempt) -> when that member's user code started, for each that ran."""
    return {
        (int(rank), int(attempt)): float(path.read_text())
        for path in marks.glob("ran-*")
        for rank, attempt in [path.name.split("-")[1:]]
    }


def _pair(cluster) -> None:  # noqa: ANN001
    """a1 and a2 in rack a, one slot each; a2 beats every 5 s, so that stopped for a few
    seconds it is not yet stale to the server (a stale worker is given nothing)."""
    cluster.start_worker("a1", labels={"rack": "a"}, max_concurrent_executions=1)
    cluster.start_worker("a2", labels={"rack": "a"}, max_concurrent_executions=1, heartbeat_interval=5.0)


def _told(log: str) -> bool:
    """A worker's member of an ended gang attempt was told so, either way the server tells
    it first: a 409 at the rendezvous, or a preemption notice in its claim (then no grace:
    it never started). The 409 alone: tests/worker/test_gang_member.py, against a fake server."""
    return "its gang's attempt ended before it started" in log or "ends in 0.0s" in log


def _pause(cluster, name: str, sig: signal.Signals) -> None:
    os.killpg(cluster.workers[name].pid, sig)  # the worker's own process group: not its children's


def test_members_on_one_worker_see_their_seats_in_ctx_gang_and_in_their_environment(setup):
    cluster, client = setup
    cluster.start_worker(
        "a1", labels={"rack": "a"}, max_concurrent_executions=2, extra_args=("--advertise-address", "127.0.0.1")
    )
    gang = client.run("together", {})
    done = ended(client, gang["id"], WAIT)
    assert done["state"] == "COMPLETED", (done["error"], done.get("placement_note"))
    reports = done["output"]  # rank 0 heard rank 1 at MASTER_ADDR:MASTER_PORT
    assert [r["rank"] for r in reports] == [0, 1]
    assert [r["local"] for r in reports] == [[0, 2], [1, 2]]
    members = reports[0]["members"]
    assert reports[1]["members"] == members
    assert [m[:2] for m in members] == [[0, "a1"], [1, "a1"]]
    ports = [int(m[2].removeprefix("127.0.0.1:")) for m in members]  # each member reserved a port of its own
    assert len(set(ports)) == 2
    for report in reports:
        assert report["env"] == report["gang_env"]  # the process environment is ctx.gang.env()
        assert report["master"] == ["127.0.0.1", ports[0]]  # rank 0's advertise address and port
        assert report["env"]["RANK"] == str(report["rank"]) and report["env"]["WORLD_SIZE"] == "2"
        assert report["env"]["LOCAL_RANK"] == str(report["rank"]) and report["env"]["LOCAL_WORLD_SIZE"] == "2"


def test_no_member_runs_user_code_until_its_peer_reaches_the_rendezvous(setup, marks):
    cluster, client = setup
    _pair(cluster)
    _pause(cluster, "a2", signal.SIGSTOP)  # its member is placed, but it does not reach the rendezvous
    try:
        gang = client.run("apart", {})
        eventually(lambda: "waits at the rendezvous" in cluster.log("worker-a1"), WAIT, "a1's member never waited")
        time.sleep(3.0)
        assert _ran(marks) == {}, "a member ran user code before its peer arrived"
        resumed = time.time()
    finally:
        _pause(cluster, "a2", signal.SIGCONT)
    done = ended(client, gang["id"], WAIT)
    assert done["state"] == "COMPLETED", (done["error"], done.get("placement_note"))
    ran = _ran(marks)
    assert sorted(rank for rank, _ in ran) == [0, 1] and len({attempt for _, attempt in ran}) == 1
    assert client.execution(gang["id"])["attempt"] == 1  # the first placement: it waited instead of failing
    assert min(ran.values()) >= resumed
    reports = done["output"]
    assert sorted(r["members"][r["rank"]][1] for r in reports) == ["a1", "a2"]
    assert {r["env"]["MASTER_ADDR"] for r in reports} == {"127.0.0.1"}  # the default: the address toward the server


def test_a_member_whose_gangs_attempt_ended_at_the_rendezvous_never_runs_user_code(setup, marks):
    cluster, client = setup
    _pair(cluster)
    _pause(cluster, "a2", signal.SIGSTOP)
    try:
        gang = client.run("hasty", {})
        eventually(
            lambda: any(e["type"] == "ATTEMPT_ENDED" for e in client.events(gang["id"])),
            WAIT,
            "the late gang's attempt was never ended",
        )
        eventually(lambda: _told(cluster.log("worker-a1")), WAIT, "a1's waiting member was never told")
    finally:
        _pause(cluster, "a2", signal.SIGCONT)  # its member of the ended attempt posts now: 409
    done = ended(client, gang["id"], WAIT)
    assert done["state"] == "COMPLETED", (done["error"], done.get("placement_note"))
    ran = _ran(marks)
    assert sorted(rank for rank, _ in ran) == [0, 1]  # once each: in the attempt that met
    assert all(attempt > 1 for _, attempt in ran), ran
    assert _told(cluster.log("worker-a2")), cluster.log("worker-a2")
