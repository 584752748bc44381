"""A gang scales a worker pool end to end (issue 53.5; docs/gangs.md#autoscaling): a real
server asks the ``local`` provider for all of a gang's workers at once, in the rack its
template carries, keeps them while the gang waits, runs the gang, and scales back down;
a pool that cannot hold the gang starts nothing and says why."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pytest
from waiting import eventually

from flux.client import FluxClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]  # minutes where the machine is shared

WAIT = 120.0
FAST = ["--heartbeat-interval", "0.5", "--warm-children", "0"]
SOURCE = """
import asyncio
from pathlib import Path

from flux import Concurrency, Gang, task, workflow

KEY = Concurrency(key="racked", limit=3)


@task
async def hold(marker: str) -> str:
    while not Path(marker).exists():
        await asyncio.sleep(0.05)
    return "released"


@workflow.with_options(concurrency=KEY)
async def blocker(ctx):
    return await hold(ctx.input)


@workflow.with_options(gang=Gang(size=3, topology="rack"))
async def trio(ctx):
    return "done"


@workflow.with_options(gang=Gang(size=3, topology="rack"), concurrency=KEY)
async def keyed_trio(ctx):
    return "done"
"""


def _pool(client: FluxClient, name: str, **spec) -> dict:
    body = {**dict(resources={"cpu": 1}, slots=1, min=0, max=4, options={"worker_args": FAST}), **spec}
    return client.create_pool(name, "local", **body)


def _workers(client: FluxClient, pool: str) -> list[dict]:
    return [w for w in client.list_workers() if w["labels"].get("flux.pool") == pool and w["state"] != "OFFLINE"]


def _members(client: FluxClient, gang_id: str) -> list[dict]:
    claimed = [e for e in client.events(gang_id) if e["type"] == "WORKFLOW_CLAIMED"]
    return [client.execution(m["execution"]) for m in claimed[-1]["value"]["members"]]


class Watch:
    """The pool's workers seen while a gang runs: every name, the most at once, any drained."""

    def __init__(self, client: FluxClient, pool: str):
        self.client, self.pool = client, pool
        self.seen: set[str] = set()
        self.most = 0
        self.stopping: set[str] = set()

    def look(self) -> dict:
        pool = self.client.show_pool(self.pool)
        self.most = max(self.most, len(pool["workers"]))
        self.seen |= {w["name"] for w in pool["workers"]}
        self.stopping |= {w["name"] for w in pool["workers"] if w["state"] == "stopping"}
        return pool

    def until_done(self, execution_id: str) -> dict:
        deadline = time.monotonic() + WAIT
        while (execution := self.client.execution(execution_id))["state"] not in ("COMPLETED", "FAILED", "CANCELLED"):
            assert time.monotonic() < deadline, self.look()
            self.look()
            time.sleep(0.2)
        return execution

    def scaled_down(self) -> None:
        eventually(
            lambda: self.client.show_pool(self.pool)["workers"] == [] and not _workers(self.client, self.pool),
            40,
            "the pool never scaled back down",
        )
        assert self.client.show_pool(self.pool)["desired"] == 0


@pytest.mark.slow
def test_a_gang_of_three_scales_a_racked_pool_from_zero_to_three_and_back(cluster, client, workflow_file):
    _from_zero_to_three_and_back(client, workflow_file)


@pytest.mark.slow
def test_the_same_on_postgresql(make_cluster, pg_url, workflow_file):
    """The pass's reads of gangs (JSON column IS NULL, queue order) on PostgreSQL too."""
    with FluxClient(make_cluster(database_url=pg_url).server_url) as client:
        _from_zero_to_three_and_back(client, workflow_file)


def _from_zero_to_three_and_back(client: FluxClient, workflow_file: Callable[[str], Path]) -> None:
    client.register_file(workflow_file(SOURCE))
    _pool(client, "racked", labels={"rack": "r1"}, idle_timeout=0.1)
    gang = client.run("trio", {})
    watch = Watch(client, "racked")
    done = watch.until_done(gang["id"])
    assert done["state"] == "COMPLETED", done
    assert watch.most == 3 and len(watch.seen) == 3 and not watch.stopping, vars(watch)
    members = _members(client, gang["id"])
    assert [m["state"] for m in members] == ["COMPLETED"] * 3
    assert {m["worker_name"] for m in members} == watch.seen
    assert all(w["labels"]["rack"] == "r1" for w in client.list_workers() if w["name"] in watch.seen)
    watch.scaled_down()


@pytest.mark.slow
def test_the_workers_a_waiting_gang_counts_on_are_not_drained_as_idle(cluster, client, workflow_file, tmp_path):
    """A single holds one of the key's three: the gang waits for it with its three workers
    registered and idle past their 0.1 s timeout, pass after pass; only the gang keeps
    them (drained, it would ask for them again)."""
    marker = tmp_path / "release"
    client.register_file(workflow_file(SOURCE))
    _pool(client, "racked", labels={"rack": "r1"}, idle_timeout=0.1)
    single = client.run("blocker", str(marker))
    eventually(lambda: client.execution(single["id"])["state"] == "RUNNING", WAIT, "the single never ran")
    gang = client.run("keyed_trio", {})
    watch = Watch(client, "racked")
    eventually(lambda: watch.look()["running"] == 4, WAIT, "the gang's three workers never registered")
    settle = time.monotonic() + 5  # at least two passes with the three idle
    while time.monotonic() < settle:
        pool = watch.look()
        assert client.execution(gang["id"])["state"] == "SCHEDULED"
    assert "3 idle kept for waiting gangs" in pool["decision"], pool
    Path(marker).touch()
    done = watch.until_done(gang["id"])
    assert done["state"] == "COMPLETED", done
    assert watch.most == 4 and len(watch.seen) == 4, vars(watch)  # none drained and asked for again
    ran = {m["worker_name"] for m in _members(client, gang["id"])}
    assert not watch.stopping & ran, vars(watch)  # the single's worker may go once idle; the gang's did not
    watch.scaled_down()


@pytest.mark.slow
def test_pools_that_cannot_hold_the_gang_start_nothing_and_say_why(cluster, client, workflow_file):
    client.register_file(workflow_file(SOURCE))
    _pool(client, "plain")  # no rack label
    _pool(client, "small", labels={"rack": "r1"}, max=2)
    gang = client.run("trio", {})
    why = (
        f"gang {gang['id']}: no pool can hold the gang of 3: pool plain's workers carry no label rack; "
        "pool small would need 3 more workers, its maximum 2 leaves 2"
    )
    for name in ("plain", "small"):
        eventually(lambda: why in (client.show_pool(name)["decision"] or ""), 20, f"pool {name} never said why")
    seen = {name: client.show_pool(name)["decided_at"] for name in ("plain", "small")}
    for name in ("plain", "small"):  # two more passes decided, still nothing started
        eventually(lambda n=name: client.show_pool(n)["decided_at"] > seen[n], 20, f"pool {name} decided nothing more")
        seen[name] = client.show_pool(name)["decided_at"]
        eventually(lambda n=name: client.show_pool(n)["decided_at"] > seen[n], 20, f"pool {name} decided nothing more")
    for name in ("plain", "small"):
        pool = client.show_pool(name)
        assert (pool["desired"], pool["workers"]) == (0, []), pool
        assert not _workers(client, name)
    assert client.execution(gang["id"])["state"] == "SCHEDULED"
    said = client.placement(gang["id"])["summary"]  # flux execution explain says what the pools say
    assert "no pool can hold the gang of 3: pool plain's workers carry no label rack" in said, said
