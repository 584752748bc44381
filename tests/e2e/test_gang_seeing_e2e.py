"""Seeing a gang (docs/gangs.md, issue 53.6), through a real server, real workers labelled
by rack and the real command line: a waiting gang's members by rank, lists that leave
them out, ``explain`` naming each rack and what it lacks, the metrics of waiting gangs;
then, once the room frees up, its members running, their logs by rank and its wait."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from waiting import eventually

from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

WAIT = 150.0  # a loaded machine (load average 15 on 2 cores) took over 90 s to run the gang

SOURCE = """
import time
from pathlib import Path

from flux import Gang, task, workflow

GO = Path({go!r})


@task
def blocked() -> None:
    while not GO.exists():
        time.sleep(0.05)


@workflow.with_options(affinity={{"busy": "yes"}})
async def hold(ctx):
    await blocked()


@workflow.with_options(gang=Gang(size=3, topology="rack"))
async def ring(ctx):
    print(f"rank {{ctx.gang.rank}} says hi")
    return ctx.gang.rank
"""


def _flux(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flux", *args, "--server-url", cluster.server_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},  # a line the test looks for is not wrapped
    )


def _metric(cluster, line_start: str) -> float | None:
    for line in httpx.get(f"{cluster.server_url}/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture
def racks(workflow_file, tmp_path: Path):
    """Rack a: a1, a2 and a3 (a3 busy with ``hold`` until ``go`` exists); rack b: b1. One
    slot each, so a gang of 3 fits only in rack a and only once a3 is free. The server is
    given 90 s to start (a loaded CI machine took 27 s)."""
    go = tmp_path / "go"
    cluster = LocalCluster(tmp_path / "home")
    try:
        cluster.start_server(timeout=90.0)
        client = FluxClient(cluster.server_url)
        client.register_file(workflow_file(SOURCE.format(go=str(go))))
        labels = {"a1": {"rack": "a"}, "a2": {"rack": "a"}, "a3": {"rack": "a", "busy": "yes"}, "b1": {"rack": "b"}}
        for name, its in labels.items():
            cluster.start_worker(name, labels=its, max_concurrent_executions=1, wait=False)
        for name in labels:
            cluster.wait_for_worker(name, timeout=90.0)
        yield cluster, client, go
        client.close()
    finally:
        cluster.close()


def test_a_waiting_gang_shows_its_members_and_why_then_runs_and_reads_by_rank(racks):
    cluster, client, go = racks
    busy = client.run("hold", None)
    eventually(lambda: client.execution(busy["id"])["state"] == "RUNNING", WAIT, "hold never ran on a3")
    gang_id = client.run("ring", None)["id"]
    eventually(lambda: client.execution(gang_id)["placement_note"], WAIT, "no round looked at the gang")

    # the API: the gang's shape and its members by rank; each member knows its gang
    gang = client.execution(gang_id)
    assert gang["gang"]["size"] == 3 and gang["gang"]["topology"] == "rack"
    members = gang["members"]
    assert [m["rank"] for m in members] == [0, 1, 2]
    assert {m["state"] for m in members} == {"SCHEDULED"} and {m["worker_name"] for m in members} == {None}
    member = client.execution(members[1]["id"])
    assert (member["gang_id"], member["rank"]) == (gang_id, 1) and member["members"] is None

    # lists: the gang, not its members, unless asked; an id prefix finds a member still
    listed = {e["id"] for e in client.list_executions()}
    assert gang_id in listed and not listed & {m["id"] for m in members}
    with_members = {e["id"] for e in client.list_executions(members=True)}
    assert {m["id"] for m in members} <= with_members
    assert client.resolve_execution(members[2]["id"][:16]) == members[2]["id"]
    shown = json.loads(_flux(cluster, "execution", "list", "--format", "json").stdout)
    assert {e["id"] for e in shown} == listed

    # explain: each rack, what it holds of the gang and what must free up
    why = client.placement(gang_id)
    expected = "in one rack: rack a has 2 that fit, b has 1; 1 more must free up in a"
    assert expected in why["summary"] and why["binding"]["kind"] == "gang topology", why["summary"]
    assert why["gang"]["shortfall"] in why["summary"]
    assert why["gang"]["domains"][0].startswith("rack a: 3 workers hold 2 now, 3 idle"), why["gang"]["domains"]
    explained = _flux(cluster, "execution", "explain", gang_id)
    assert explained.returncode == 0 and expected in explained.stdout, explained.stdout + explained.stderr
    assert "rack b: 1 workers hold 1 now" in explained.stdout
    assert why["queue"]["position"] == 1  # a gang is one entry of the queue, its members none
    member_why = client.placement(members[0]["id"])
    assert f"rank 0 of gang {gang_id}" in member_why["summary"] and member_why["queue"]["position"] is None
    assert httpx.get(f"{cluster.server_url}/namespaces/default").json()["waiting"] == {"0": 1}

    # show: the members by rank
    show = _flux(cluster, "execution", "show", gang_id)
    assert show.returncode == 0 and "gang of 3 in one rack" in show.stdout, show.stdout + show.stderr
    assert all(f"│ {rank} " in show.stdout for rank in range(3)), show.stdout

    # metrics: one gang waits; the queue counts it once, not its members
    assert _metric(cluster, 'flux_gangs_waiting{namespace="default"}') == 1.0
    assert _metric(cluster, 'flux_pending_executions{namespace="default",priority="0"}') == 1.0

    # room frees up in rack a: the gang is placed whole and runs
    go.touch()
    try:
        done = eventually(lambda: (e := client.execution(gang_id))["state"] in ("COMPLETED", "FAILED") and e, WAIT)
    except AssertionError:
        gang, hold = client.execution(gang_id), client.execution(busy["id"])
        events = [(e["type"], e["value"]) for e in client.events(gang_id)]
        raise AssertionError(f"gang never ended: {gang['state']}, {gang['members']}, {events}; hold: {hold['state']}")
    assert done["state"] == "COMPLETED", (done["error"], done["placement_note"])
    assert [m["state"] for m in done["members"]] == ["COMPLETED"] * 3
    assert {m["worker_name"] for m in done["members"]} == {"a1", "a2", "a3"}
    assert client.placement(gang_id)["summary"].startswith("gang placed in rack a: ")

    logs = _flux(cluster, "execution", "logs", gang_id, "--rank", "2")
    assert logs.returncode == 0 and "rank 2 says hi" in logs.stdout and "rank 0" not in logs.stdout, logs.stdout
    default = _flux(cluster, "execution", "logs", gang_id)
    assert "rank 0 says hi" in default.stdout and "--rank 0 to 2" in default.stderr, default.stdout + default.stderr
    wrong = _flux(cluster, "execution", "logs", gang_id, "--rank", "3")
    assert wrong.returncode != 0 and "ranks 0 to 2, not 3" in wrong.stderr

    assert _metric(cluster, 'flux_gang_wait_seconds_count{namespace="default",workflow="ring"}') == 1.0
    assert _metric(cluster, 'flux_gangs_waiting{namespace="default"}') is None
