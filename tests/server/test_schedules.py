"""Schedules end to end (docs/schedules.md): real server and worker processes.

One scenario per concern: the API and CLI (bad input stored nowhere), overlap
policies with runs longer than the interval, catch-up after the server was down, and
(slow, PostgreSQL) two replicas firing an every-second schedule while one is killed.
"""

from __future__ import annotations

import json
import signal
import time

import httpx
import pytest
from shared import flux
from waiting import eventually

from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = pytest.mark.integration

NAP = """
    import asyncio
    from flux import workflow

    @workflow
    async def nap(ctx):
        await asyncio.sleep(ctx.input or 0)
        return ctx.input
"""


def runs(client: FluxClient, schedule: str) -> list[dict]:
    """Its executions, oldest due time first."""
    return sorted(client.list_executions(schedule=schedule, limit=1000), key=lambda e: e["scheduled_for"])


@pytest.mark.slow  # over ~20 s: CI's second step
def test_schedules_through_the_api_and_the_cli(cluster, client, workflow_file):
    client.register_file(workflow_file(NAP))
    url = f"{cluster.server_url}/schedules"
    bad = [
        ({"cron": "61 * * * *"}, "cron"),
        ({"every": 0}, "every"),
        ({"every": "-5s"}, "every"),
        ({"every": "5m", "timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({}, "exactly one of cron, every or at"),
        ({"cron": "@daily", "workflow": "no_such_workflow"}, "no_such_workflow"),
        ({"at": "2001-01-01T00:00:00"}, "in the past"),
        ({"every": "1m", "overlap": "sometimes"}, "overlap"),
        ({"every": "1m", "catch_up": "some"}, "catch_up"),
    ]
    for fields, reason in bad:
        reply = httpx.post(url, json={"name": "bad", "workflow": "nap", **fields})
        assert reply.status_code == 422, (fields, reply.text)
        assert reason in reply.text and reply.json()["code"] in ("validation_error", "invalid")
    assert client.list_schedules() == []  # nothing stored

    created = flux(
        "schedule",
        "create",
        "nightly",
        "nap",
        "--cron",
        "30 2 * * *",
        "--timezone",
        "America/New_York",
        "--input",
        "0",
        "--format",
        "json",
        server_url=cluster.server_url,
    )
    nightly = json.loads(created.stdout)
    assert nightly["kind"] == "cron" and nightly["overlap"] == "skip" and nightly["catch_up"] == "latest"
    assert len(nightly["next_fire_times"]) == 5
    assert all(
        "T02:30:00" in t or "T03:00:00" in t for t in nightly["next_fire_times"]
    )  # 03:00 on a spring-forward day
    refused = flux("schedule", "create", "x", "nap", "--every", "0s", server_url=cluster.server_url, check=False)
    assert refused.returncode == 2 and "more than 0 seconds" in refused.stderr
    assert "nightly" in flux("schedule", "list", server_url=cluster.server_url).stdout
    assert client.create_schedule("often", "nap", every="1s", input=0, overlap="allow_all")["every"] == 1.0
    assert httpx.post(url, json={"name": "often", "workflow": "nap", "every": 5}).status_code == 409

    fired = eventually(lambda: runs(client, "often")[:2] if len(runs(client, "often")) >= 2 else None, timeout=10)
    assert [e["schedule"] for e in fired] == ["often", "often"]
    assert fired[1]["scheduled_for"] - fired[0]["scheduled_for"] == 1.0 and fired[0]["scheduled_for"].is_integer()
    assert all(e["scheduled_at"] >= e["scheduled_for"] for e in fired)  # never early (how late: B10's fire_lateness)
    listed = json.loads(
        flux("execution", "list", "--schedule", "often", "--format", "json", server_url=cluster.server_url).stdout
    )
    assert listed and {e["schedule"] for e in listed} == {"often"}
    assert client.list_executions(schedule="nightly") == []

    assert (
        flux("schedule", "pause", "often", "--format", "json", server_url=cluster.server_url).stdout.count(
            '"paused": true'
        )
        == 1
    )
    # a canary every second: once it fired twice, a firing pass that began after the pause
    # has ended (a pass under way may still have fired "often"); twice more, another has run
    client.create_schedule("canary", "nap", every="1s", input=0, overlap="allow_all")
    canary_fired_twice_more(client)
    count = len(runs(client, "often"))
    canary_fired_twice_more(client)
    assert len(runs(client, "often")) == count  # paused: nothing fires
    client.delete_schedule("canary")
    assert client.show_schedule("often")["next_fire_times"] == []
    triggered = json.loads(
        flux("schedule", "trigger", "often", "--format", "json", server_url=cluster.server_url).stdout
    )
    assert triggered["schedule"] == "often" and len(runs(client, "often")) == count + 1
    resumed = client.resume_schedule("often")
    assert not resumed["paused"] and len(resumed["next_fire_times"]) == 5
    changed = client.update_schedule("often", every="1h", timezone="Europe/Paris")
    assert changed["every"] == 3600 and changed["next_fire_times"][0][-12:] in (":00:00+01:00", ":00:00+02:00")
    assert httpx.patch(f"{url}/often", json={"cron": "nope"}).status_code == 422
    assert client.show_schedule("often")["every"] == 3600  # a refused change changes nothing
    flux("schedule", "delete", "often", server_url=cluster.server_url)
    assert httpx.get(f"{url}/often").status_code == 404
    assert runs(client, "often")  # its runs stay
    metrics = httpx.get(f"{cluster.server_url}/metrics").text
    assert (
        'flux_schedule_fires_total{how="due"}' in metrics and 'flux_schedule_fires_total{how="trigger"} 1.0' in metrics
    )
    assert "flux_schedule_lateness_seconds_count" in metrics


def canary_fired_twice_more(client: FluxClient) -> None:
    fired = len(runs(client, "canary"))
    eventually(lambda: len(runs(client, "canary")) >= fired + 2, 30, "the canary stopped firing")


def _overlapping(executions: list[dict]) -> bool:
    """Whether any run started before the one before it ended."""
    return any(later["scheduled_at"] < earlier["finished_at"] for earlier, later in zip(executions, executions[1:]))


@pytest.mark.slow
def test_overlap_policies_with_runs_longer_than_the_interval(cluster, client, workflow_file):
    """Runs of 2.5 s every second, for about 6 s, one schedule per policy."""
    client.register_file(workflow_file(NAP))
    cluster.start_worker("w1", runner="inprocess", max_concurrent_executions=16)
    policies = ("skip", "queue_one", "allow_all", "cancel_previous")
    for policy in policies:
        client.create_schedule(policy, "nap", every="1s", input=2.5, overlap=policy)
    held = eventually(lambda: client.show_schedule("queue_one")["queued_for"], timeout=10)
    assert held  # a due time waits for the active run
    enough = {"skip": 2, "queue_one": 2, "allow_all": 5, "cancel_previous": 5}
    eventually(lambda: all(len(runs(client, p)) >= n for p, n in enough.items()), 60, "too few fires")
    for policy in policies:
        client.pause_schedule(policy)
    done = {}
    for policy in policies:
        done[policy] = eventually(
            lambda p=policy: (lambda r: r if all(e["state"] in ("COMPLETED", "CANCELLED") for e in r) else None)(
                runs(client, p)
            ),
            timeout=30,
        )
    skip, queue_one, allow_all, cancel_previous = (done[p] for p in policies)
    assert 2 <= len(skip) < len(allow_all) and not _overlapping(skip)  # due times skipped
    assert {e["state"] for e in skip} == {"COMPLETED"}
    assert 2 <= len(queue_one) < len(allow_all) and not _overlapping(queue_one)
    assert any(
        e["scheduled_at"] - e["scheduled_for"] > 0.5 for e in queue_one
    )  # held, then started when the run before ended
    assert len(allow_all) >= 5 and _overlapping(allow_all)
    assert len(cancel_previous) >= 5
    assert {e["state"] for e in cancel_previous[:-1]} == {"CANCELLED"}  # each replaced by the next
    assert cancel_previous[-1]["state"] == "COMPLETED"  # the last was never replaced
    metrics = httpx.get(f"{cluster.server_url}/metrics").text
    assert 'flux_schedule_skips_total{reason="overlap"}' in metrics


@pytest.mark.slow
def test_catch_up_after_the_server_was_down_for_five_due_times(cluster, client, workflow_file):
    client.register_file(workflow_file(NAP))
    for policy in ("latest", "all", "none"):
        client.create_schedule(f"catch-{policy}", "nap", every="1s", catch_up=policy, overlap="allow_all")
    eventually(lambda: all(runs(client, f"catch-{p}") for p in ("latest", "all", "none")), timeout=10)
    cluster.stop_server()
    down = time.time()
    time.sleep(6)
    restart = time.time()
    cluster.start_server()
    up = time.time()

    def missed(policy: str, until: float) -> list[float]:
        return [e["scheduled_for"] for e in runs(client, f"catch-{policy}") if down < e["scheduled_for"] <= until]

    # the catch-up fires, and one due time after the restart for "none" (it has passed the downtime)
    eventually(lambda: len(missed("all", restart)) >= 5 and missed("latest", up), 30, "the downtime never fired")
    eventually(lambda: any(e["scheduled_for"] > up for e in runs(client, "catch-none")), 30, "none never fired again")
    for policy in ("latest", "all", "none"):
        client.pause_schedule(f"catch-{policy}")
    due = {p: [e["scheduled_for"] for e in runs(client, f"catch-{p}")] for p in ("latest", "all", "none")}
    missed = [d for d in due["all"] if down < d < restart]
    assert len(missed) >= 5  # every due time of the downtime, fired after it
    assert due["all"] == [due["all"][0] + i for i in range(len(due["all"]))]  # none missing, none doubled
    assert len([d for d in due["latest"] if down < d < restart]) <= 1
    assert [d for d in due["latest"] if down < d <= up]  # the latest missed one
    assert [d for d in due["none"] if down < d < restart] == []
    assert len(due["none"]) == len(set(due["none"]))
    metrics = httpx.get(f"{cluster.server_url}/metrics").text
    assert 'flux_schedule_skips_total{reason="catch_up"}' in metrics


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_two_replicas_on_postgresql_fire_each_second_exactly_once_when_one_is_killed(tmp_path, pg_url, workflow_file):
    home = tmp_path / "home"
    replicas = [LocalCluster(home, database_url=pg_url, log_dir=tmp_path / f"logs{i}") for i in range(2)]
    try:
        for replica in replicas:
            replica.start_server()
        with FluxClient(replicas[1].server_url) as client:
            client.register_file(workflow_file(NAP))
            client.create_schedule("tick", "nap", every="1s", overlap="allow_all")
            created = time.time()
            eventually(lambda: len(runs(client, "tick")) >= 10, 60, "both replicas running, it never fired")
            replicas[0].stop_server(signal.SIGKILL)  # mid-stride: whatever it held is rolled back
            killed = time.time()
            eventually(
                lambda: len([e for e in runs(client, "tick") if e["scheduled_for"] > killed + 1]) >= 10,
                60,
                "the survivor never took the firing over",
            )
            client.pause_schedule("tick")
            executions = runs(client, "tick")
        due = [e["scheduled_for"] for e in executions]
        assert len(due) == len(set(due))  # none doubled
        assert due == [due[0] + i for i in range(len(due))]  # none missing, across the kill too
        assert created - 1 <= due[0] and all(e["scheduled_at"] >= e["scheduled_for"] for e in executions)
    finally:
        for replica in replicas:
            replica.close()
