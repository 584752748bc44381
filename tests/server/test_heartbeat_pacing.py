"""Heartbeat pacing (docs/fleet.md#heartbeat-pacing): a fleet sends at most
``--max-heartbeats-per-second``; a larger one is told to beat less often, and its
silence is counted in the interval it was told."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from protocol import ProtocolWorker, metric
from waiting import eventually

from flux.client import FluxClient
from flux.domain.workers import paced_interval
from flux.local import LocalCluster

pytestmark = pytest.mark.integration


def test_the_paced_interval_is_the_workers_own_until_the_fleet_would_beat_too_often():
    assert paced_interval(5.0, 100, 50.0) == 5.0  # 20 beats a second: under the limit
    assert paced_interval(5.0, 1000, 50.0) == 20.0  # 200 would be: 50
    assert paced_interval(0.5, 1000, 0.0) == 0.5  # 0: no limit
    assert paced_interval(30.0, 1000, 50.0) == 30.0  # never shorter than its own


@pytest.fixture
def one_beat_a_second(tmp_path):
    """A server paced to one heartbeat a second, and a maker of protocol workers that
    would beat every 0.5 s (closed with the server)."""
    cluster = LocalCluster(tmp_path, server_args=("--max-heartbeats-per-second", "1"))
    workers: list[ProtocolWorker] = []

    def worker(name: str) -> ProtocolWorker:
        workers.append(ProtocolWorker(cluster.server_url, cluster.home, name, heartbeat_interval=0.5))
        return workers[-1]

    try:
        cluster.start_server()
        yield cluster, worker
    finally:
        for made in workers:
            made.close()
        cluster.close()


def test_the_registration_and_heartbeat_replies_carry_the_paced_interval_with_a_protocol_worker(one_beat_a_second):
    _, worker = one_beat_a_second
    workers = [worker(f"p{i}") for i in range(3)]
    replies = [w.register() for w in workers]
    assert [reply["heartbeat_interval"] for reply in replies] == [1.0, 2.0, 3.0]  # the fleet as each joined
    assert workers[0].heartbeat()["heartbeat_interval"] == 3.0  # three workers at one beat a second


def test_real_workers_beat_at_the_servers_pace_and_stay_online_past_three_of_their_own_intervals(tmp_path):
    # 4 workers that would beat every 0.5 s are paced to 2 s (2 beats a second for all);
    # their own interval would find them stale after 1.5 s of silence, the pace after 6 s.
    cluster = LocalCluster(tmp_path, eviction_grace_period=3.0, server_args=("--max-heartbeats-per-second", "2"))
    try:
        cluster.start_server()
        for i in range(4):
            cluster.start_worker(f"w{i}", heartbeat_interval=0.5)
        with FluxClient(cluster.server_url) as client:
            eventually(lambda: len([w for w in client.list_workers() if w["state"] == "ONLINE"]) == 4, 30)
            paced = "heartbeats every 2 s (the server paces its fleet)"
            eventually(lambda: all(paced in cluster.log(f"worker-w{i}") for i in range(4)), 30, "a worker not paced")
            before, started = metric(cluster.server_url, "flux_heartbeats_total"), time.monotonic()
            states = set()
            while time.monotonic() - started < 8:  # past the 6 s of silence the pace allows
                states |= {w["state"] for w in client.list_workers()}
                time.sleep(0.25)
            beats = metric(cluster.server_url, "flux_heartbeats_total") - before
            window = time.monotonic() - started
        assert states == {"ONLINE"}  # never STALE, never evicted
        # at most a beat every 2 s each (and one in flight at each end of the window), not
        # the 2 a second each of their own intervals; a slow machine only beats less
        assert beats <= 4 * (window / 2 + 2), (beats, window)
    finally:
        cluster.close()


def test_a_fleet_that_shrank_does_not_find_a_worker_stale_before_the_beat_it_was_told_with_a_protocol_worker(
    one_beat_a_second,
):
    cluster, worker = one_beat_a_second
    workers = [worker(f"s{i}") for i in range(4)]
    for w in workers:
        w.register()
    assert workers[0].heartbeat()["heartbeat_interval"] == 4.0
    for w in workers[1:]:
        w.post(f"/workers/{w.name}/shutdown", {}).raise_for_status()
    # a canary joins the fleet of two and is told 2 s: it is STALE after three of them. s0,
    # silent since before it, would be STALE by then were it judged by the pace of now (2 s)
    # instead of the 4 s it was told; the sweep that finds the canary proves it is not.
    canary = worker("canary")
    assert canary.register()["heartbeat_interval"] == 2.0
    with FluxClient(cluster.server_url) as client:
        eventually(lambda: client.show_worker("canary")["state"] == "STALE", 30, "the canary never went stale")
        assert client.show_worker("s0")["state"] == "ONLINE"
    canary.post("/workers/canary/shutdown", {}).raise_for_status()
    assert workers[0].heartbeat()["heartbeat_interval"] == 1.0  # told the pace of the smaller fleet


@pytest.mark.parametrize(
    "option, value",
    [("--max-heartbeats-per-second", "nan"), ("--max-heartbeats-per-second", "-1"), ("--shed-after", "inf")],
)
def test_a_limit_that_is_not_a_finite_number_in_range_stops_the_server_at_start(tmp_path, option, value):
    # nan passes every bound (each comparison is false): it would have turned the limit off
    started = subprocess.run(
        [sys.executable, "-m", "flux", "start", "server", "--port", "0", "--home", str(tmp_path), option, value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2 and f"Invalid value for '{option}'" in started.stderr, started.stderr
    assert "Traceback" not in started.stderr
