"""Holding a fleet (issue 22): an idle worker costs the server no database work.

Real server processes; workers speak the real protocol from the test
(``protocol.ProtocolWorker``) where the test must control every sample they send,
and are real worker processes elsewhere. Statement counts come from the server's
own ``flux_db_statements_total`` (its scrape queries are not counted).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from protocol import ONE_TASK, ROUNDS, GiB, ProtocolWorker, metric, quiet_statements, sample, statements
from waiting import eventually

from flux.client import FluxClient
from flux.local import LocalCluster

SLOW = """
    import asyncio
    from flux import task, workflow

    @task
    async def nap(seconds):
        await asyncio.sleep(seconds)

    @workflow
    async def slow(ctx):
        await nap(ctx.input)
"""


@pytest.fixture
def protocol_worker(cluster):
    worker = ProtocolWorker(cluster.server_url, cluster.home, "synthetic", heartbeat_interval=0.1)
    yield worker
    worker.close()


@pytest.mark.slow  # over ~20 s: CI's second step
def test_an_idle_worker_causes_no_database_write_or_query_after_registration_with_a_protocol_worker(cluster):
    """200 unchanged heartbeats (at the default 5 s interval, over a quarter of an hour)
    and claims waiting all along: no write, and no read but at most one idle dispatch round.
    It declares a 1 s interval and beats ten times as often, so that a busy test machine
    cannot make it look stale (which rightly costs a dispatch round)."""
    protocol_worker = ProtocolWorker(cluster.server_url, cluster.home, "idle", heartbeat_interval=1.0)
    protocol_worker.register()
    protocol_worker.heartbeat()  # what it holds is learnt once, at registration or here
    assert protocol_worker.claim(wait=0)["executions"] == []
    before = quiet_statements(cluster.server_url)  # the dispatcher has read the new worker's row, never again
    stop = threading.Event()

    def keep_claiming():
        while not stop.is_set():
            protocol_worker.claim(wait=2)

    claimer = threading.Thread(target=keep_claiming)
    claimer.start()
    try:
        for _ in range(200):
            assert protocol_worker.heartbeat()["state"] == "ONLINE"
            time.sleep(0.1)
    finally:
        stop.set()
        claimer.join(timeout=10)
        protocol_worker.close()
    after = statements(cluster.server_url)
    assert after["write"] - before["write"] == 0
    assert after["read"] - before["read"] <= 1  # the dispatcher's idle safety round, once a minute at most
    assert metric(cluster.server_url, "flux_heartbeats_total") >= 200
    assert metric(cluster.server_url, "flux_worker_status_writes_total") == 0


def test_a_sample_that_moves_past_the_threshold_is_seen_within_one_heartbeat_with_a_protocol_worker(
    cluster, protocol_worker, client
):
    protocol_worker.register(memory_available=8 * GiB)
    before = statements(cluster.server_url)
    protocol_worker.heartbeat(resources=sample(memory_available=8 * GiB - 10 * 1024**2))  # 10 MiB: below the threshold
    assert client.show_worker("synthetic")["resources"]["memory_available"] == 8 * GiB
    assert statements(cluster.server_url)["write"] == before["write"]

    protocol_worker.heartbeat(resources=sample(memory_available=5 * GiB))  # 3 GiB freed up or taken: material
    shown = client.show_worker("synthetic")["resources"]
    assert shown["memory_available"] == 5 * GiB
    assert metric(cluster.server_url, "flux_worker_status_writes_total") == 1


def test_a_real_worker_publishes_a_changed_metric_with_its_heartbeats(cluster, client, tmp_path, monkeypatch):
    """A user metric is material on any change; the worker sends it, the server stores it.
    How soon is one heartbeat interval (the worker reads its provider on every beat),
    not a figure timed here."""
    (tmp_path / "depth.py").write_text(
        "from pathlib import Path\n"
        f"def read():\n    return {{'queue_depth': float(Path({str(tmp_path / 'depth.txt')!r}).read_text())}}\n"
    )
    (tmp_path / "depth.txt").write_text("1")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    cluster.start_worker("w1", heartbeat_interval=0.3, extra_args=("--metrics-provider", "depth:read"))
    assert client.show_worker("w1")["resources"]["metrics"]["queue_depth"] == 1.0
    (tmp_path / "depth.txt").write_text("7")
    eventually(lambda: client.show_worker("w1")["resources"]["metrics"]["queue_depth"] == 7.0, timeout=30)
    assert metric(cluster.server_url, "flux_worker_status_writes_total") >= 1  # stored, not only held in memory


def test_a_waiting_claim_issues_no_query_until_work_arrives_then_wakes_at_once_with_a_protocol_worker(
    cluster, client, workflow_file
):
    client.register_file(workflow_file(ONE_TASK))
    protocol_worker = ProtocolWorker(
        cluster.server_url, cluster.home, "waiter", heartbeat_interval=5
    )  # not stale within the test
    protocol_worker.register()
    protocol_worker.claim(wait=0)
    before = quiet_statements(cluster.server_url)  # the dispatcher has read the new worker's row
    assert protocol_worker.claim(wait=2)["executions"] == []  # a whole wait, answered empty
    assert statements(cluster.server_url) == before  # not one statement while it waited
    claimer, result = protocol_worker.claim_in_background(wait=60)
    eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") == 1, timeout=30)
    submitted = time.monotonic()
    execution = client.run("one_task", 3)
    claimer.join(timeout=90)
    assert [job["id"] for job in result["reply"]["executions"]] == [execution["id"]]
    # woken by the work, not answered when its wait ran out (how soon: B1's claim_half and
    # start_half, bench/README.md)
    assert result["at"] - submitted < 30
    protocol_worker.complete(result["reply"]["executions"][0], 3)
    assert client.wait(execution["id"], 10)["state"] == "COMPLETED"
    protocol_worker.close()


def test_a_new_workers_first_claim_reads_nothing_and_work_queued_before_it_came_reaches_it_with_a_protocol_worker(
    cluster, client, workflow_file
):
    """A worker that has just registered holds nothing undelivered: its first claim
    waits for a wake-up instead of querying. Work that queued before it registered is
    placed by the round its registration kicks, and that claim gets it at once."""
    client.register_file(workflow_file(ONE_TASK))
    early = ProtocolWorker(cluster.server_url, cluster.home, "first-claim", heartbeat_interval=5)
    early.register()
    before = quiet_statements(cluster.server_url)  # the dispatcher has read the new worker's row
    assert early.claim(wait=0)["executions"] == []
    assert statements(cluster.server_url) == before
    assert early.post("/workers/first-claim/shutdown", {}).status_code == 200
    early.close()  # no worker now: what is submitted waits in the queue
    execution = client.run("one_task", 4)
    late = ProtocolWorker(cluster.server_url, cluster.home, "late", heartbeat_interval=5)
    late.register()
    reply = late.claim(wait=60)  # the registration's round placed it: the claim finds it, not its wait's end
    assert [job["id"] for job in reply["executions"]] == [execution["id"]]
    late.complete(reply["executions"][0], 4)
    assert client.wait(execution["id"], 10)["state"] == "COMPLETED"
    late.close()


def test_a_session_token_is_revoked_at_once_by_re_registration_with_a_protocol_worker(cluster, protocol_worker):
    protocol_worker.register()
    old = protocol_worker.token
    protocol_worker.heartbeat()  # cached by now
    protocol_worker.register()
    reply = httpx.post(
        f"{cluster.server_url}/workers/synthetic/heartbeat",
        json={"running": []},
        headers={"Authorization": f"Bearer {old}"},
    )
    assert reply.status_code == 401
    assert protocol_worker.heartbeat()["state"] == "ONLINE"


def test_a_silent_worker_goes_stale_then_is_evicted_and_its_token_revoked_with_a_protocol_worker(
    make_cluster, workflow_file
):
    cluster = make_cluster(eviction_grace_period=2)
    worker = ProtocolWorker(cluster.server_url, cluster.home, "quiet", heartbeat_interval=0.2)
    try:
        worker.register()
        with FluxClient(cluster.server_url) as client:
            eventually(lambda: client.show_worker("quiet")["state"] == "STALE", timeout=5)
            eventually(lambda: client.show_worker("quiet")["state"] == "OFFLINE", timeout=10)
        assert worker.post("/workers/quiet/heartbeat", {"running": []}).status_code == 401
        assert metric(cluster.server_url, "flux_evictions_total") == 1
    finally:
        worker.close()


@pytest.mark.slow
def test_a_server_stalled_past_the_grace_period_does_not_evict_live_workers(make_cluster, workflow_file):
    """Lateness the server caused itself (here: SIGSTOP, as a long GC pause or an
    overloaded host would) is not blamed on the workers."""
    cluster = make_cluster(eviction_grace_period=2)
    cluster.start_worker("w1", heartbeat_interval=0.2, runner="inprocess")
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(ONE_TASK))
        cluster.server.send_signal(signal.SIGSTOP)
        time.sleep(4)  # the stall itself: twice the grace period
        cluster.server.send_signal(signal.SIGCONT)
        # the server forgives the silence it caused before its first sweep; once the
        # worker is heard again after that, the stall can no longer evict it
        eventually(lambda: "worker silence is not counted" in cluster.log("server"), timeout=30)
        heard = metric(cluster.server_url, "flux_heartbeats_total")
        eventually(lambda: metric(cluster.server_url, "flux_heartbeats_total") > heard, timeout=30)
        assert client.show_worker("w1")["state"] == "ONLINE"
        assert metric(cluster.server_url, "flux_evictions_total") == 0
        assert client.run("one_task", 1, wait=20)["state"] == "COMPLETED"
    assert "evicted" not in cluster.log("server")


def test_re_registering_after_a_restart_rewrites_no_packages_with_a_protocol_worker(cluster, protocol_worker):
    protocol_worker.register()
    before = statements(cluster.server_url)
    protocol_worker.register()
    writes = statements(cluster.server_url)["write"] - before["write"]
    assert writes < 10  # the worker row and its sample; not 100 package rows


def test_several_processes_need_postgresql(tmp_path):
    from click.testing import CliRunner

    from flux import cli

    result = CliRunner().invoke(cli.main, ["start", "server", "--home", str(tmp_path), "--processes", "2"])
    assert result.exit_code != 0 and "several processes need PostgreSQL" in result.output


def test_a_lease_interval_past_a_third_of_the_grace_period_is_refused_on_postgresql(tmp_path, pg_url):
    from click.testing import CliRunner

    from flux import cli

    result = CliRunner().invoke(
        cli.main,
        [
            "start",
            "server",
            "--home",
            str(tmp_path),
            "--database-url",
            pg_url,
            "--eviction-grace-period",
            "30",
            "--lease-interval",
            "11",
        ],
    )
    assert result.exit_code != 0 and "more than a third of the eviction grace period" in result.output


@pytest.mark.slow
def test_two_server_processes_on_postgresql_serve_one_fleet(tmp_path, pg_url, workflow_file):
    cluster = LocalCluster(tmp_path / "home", database_url=pg_url)
    try:
        cluster.start_server(extra_args=("--processes", "2"))
        with FluxClient(cluster.server_url) as client:
            client.register_file(workflow_file(ONE_TASK))
            for name in ("w1", "w2"):
                cluster.start_worker(name, runner="inprocess", heartbeat_interval=0.5)
            runs = [client.run("one_task", n) for n in range(20)]
            done = [client.wait(r["id"], 30) for r in runs]
            assert [e["state"] for e in done] == ["COMPLETED"] * 20
            assert [e["output"] for e in done] == list(range(20))
    finally:
        cluster.close()


@pytest.mark.slow
def test_work_submitted_on_one_replica_wakes_a_claim_waiting_on_the_other_with_a_protocol_worker(
    tmp_path, pg_url, workflow_file
):
    """Each claim is woken by the submission on the other replica, not answered when its
    wait runs out. How soon is a figure: B7 with ``--database postgres --processes 2``
    (``submit_to_received_ms``: a worker's claims and the submissions meet any process)."""
    home = tmp_path / "home"
    replicas = [LocalCluster(home, database_url=pg_url, log_dir=tmp_path / f"logs{i}") for i in range(2)]
    worker = None
    try:
        for replica in replicas:
            replica.start_server()
        worker = ProtocolWorker(replicas[0].server_url, home, "remote-waiter")
        worker.register()
        with FluxClient(replicas[1].server_url) as client:
            client.register_file(workflow_file(ONE_TASK))
            for n in range(5):
                worker.claim(wait=0)
                claimer, result = worker.claim_in_background(wait=60)
                eventually(lambda: metric(replicas[0].server_url, "flux_long_poll_waiters") == 1, timeout=30)
                submitted = time.monotonic()
                execution = client.run("one_task", n)
                claimer.join(timeout=90)
                assert [job["id"] for job in result["reply"]["executions"]] == [execution["id"]]
                assert result["at"] - submitted < 30  # woken, not its wait's end
                worker.complete(result["reply"]["executions"][0], n)
    finally:
        if worker is not None:
            worker.close()
        for replica in replicas:
            replica.close()


@pytest.mark.slow
def test_a_healthy_worker_heard_by_one_replica_is_never_stale_on_the_other_with_a_protocol_worker(tmp_path, pg_url):
    """Replica 1 knows of the worker only from the leases replica 0 flushes: its view
    can be two lease periods and a beat old (flush, then read, each on its own phase),
    and must not call that STALE (dispatch would skip a healthy worker). Before
    2026-12-04 it did past one period and two beats."""
    home = tmp_path / "home"
    replicas = [
        LocalCluster(home, database_url=pg_url, log_dir=tmp_path / f"logs{i}", server_args=("--lease-interval", "1"))
        for i in range(2)
    ]
    worker = None
    try:
        for replica in replicas:
            replica.start_server()
        worker = ProtocolWorker(replicas[0].server_url, home, "heard-on-0", heartbeat_interval=0.5)
        worker.register()
        seen = set()
        until = time.monotonic() + 8.0
        next_beat = time.monotonic()
        while time.monotonic() < until:
            if time.monotonic() >= next_beat:  # on the interval it declared, as a worker does
                worker.heartbeat()
                next_beat += 0.5
            seen.add(httpx.get(f"{replicas[1].server_url}/workers/heard-on-0", timeout=5).json()["state"])
            time.sleep(0.05)
        assert seen == {"ONLINE"}, seen
    finally:
        if worker is not None:
            worker.close()
        for replica in replicas:
            replica.close()


def test_a_checkpoint_batch_sent_twice_is_recorded_once_with_a_protocol_worker(cluster, client, workflow_file):
    """The worker re-sends a batch when the response to it was lost; it cannot know
    whether the server committed it. The server acknowledges the copy without appending it."""
    client.register_file(workflow_file(ONE_TASK))
    worker = ProtocolWorker(cluster.server_url, cluster.home, "resender", heartbeat_interval=5)
    try:
        worker.register()
        execution = client.run("one_task", 1)
        job = eventually(lambda: worker.claim(wait=5)["executions"], timeout=10)[0]
        started = {
            "attempt": job["attempt"],
            "batch": 1,
            "events": [{"type": "WORKFLOW_STARTED", "name": "one_task", "time": time.time()}],
        }
        for _ in range(2):
            assert worker.post(f"/executions/{job['id']}/checkpoint", started).json()["state"] == "RUNNING"
        skipped = {**started, "batch": 3}
        assert worker.post(f"/executions/{job['id']}/checkpoint", skipped).status_code == 409
        done = {
            "attempt": job["attempt"],
            "batch": 2,
            "events": [{"type": "WORKFLOW_COMPLETED", "name": "one_task", "value": 1, "time": time.time()}],
        }
        for _ in range(2):  # the final batch again: acknowledged with the final state, not a conflict
            reply = worker.post(f"/executions/{job['id']}/checkpoint", done)
            assert (reply.status_code, reply.json()["state"]) == (200, "COMPLETED")
        types = [e["type"] for e in client.events(execution["id"])]
        assert types.count("WORKFLOW_STARTED") == 1 and types.count("WORKFLOW_COMPLETED") == 1
    finally:
        worker.close()


def test_a_live_workers_name_cannot_be_taken_with_the_bootstrap_token_alone_with_a_protocol_worker(cluster, client):
    cluster.start_worker("w1", heartbeat_interval=0.3, runner="inprocess")
    impostor = ProtocolWorker(cluster.server_url, cluster.home, "w1")
    try:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            impostor.register()
        assert refused.value.response.status_code == 409
        assert "held by another worker" in refused.value.response.json()["detail"]
        assert client.show_worker("w1")["state"] == "ONLINE"  # the real one carries on
    finally:
        impostor.close()


def test_a_second_worker_process_with_a_taken_name_exits_with_the_reason(cluster, tmp_path):
    first = cluster.start_worker("w1", heartbeat_interval=0.3, runner="inprocess")
    same_host = cluster.start_worker("w1", runner="inprocess", wait=False)
    assert same_host.wait(timeout=30) != 0
    cluster.workers["w1"] = first  # the cluster stops the one that runs
    assert "already running on this host" in cluster.log("worker-w1")
    other_host = subprocess.run(  # another machine: another home, no token of w1's
        [
            sys.executable,
            "-m",
            "flux.cli",
            "start",
            "worker",
            "w1",
            "--server-url",
            cluster.server_url,
            "--home",
            str(tmp_path / "elsewhere"),
            "--runner",
            "inprocess",
            "--gpu-source",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FLUX_BOOTSTRAP_TOKEN": (cluster.home / "bootstrap-token").read_text().strip()},
    )
    assert other_host.returncode != 0
    assert "held by another worker" in other_host.stderr and "Traceback" not in other_host.stderr


def test_a_worker_restarted_after_a_crash_takes_its_name_back_at_once(cluster, client, workflow_file):
    client.register_file(workflow_file(SLOW))
    cluster.start_worker("w1", heartbeat_interval=0.3)
    execution = client.run("slow", 30)
    eventually(lambda: client.execution(execution["id"])["state"] == "RUNNING")
    cluster.kill_worker("w1")  # SIGKILL: no shutdown, no release
    cluster.start_worker("w1", heartbeat_interval=0.3)  # presents the token it kept on this host
    events = eventually(
        lambda: [e for e in client.events(execution["id"]) if e["type"] == "WORKFLOW_RESCHEDULED"], timeout=10
    )
    assert "restarted without it" in events[0]["value"]["reason"]
    client.cancel(execution["id"])


def test_waiters_live_only_as_long_as_their_request_with_a_protocol_worker(cluster, protocol_worker):
    """Lookups of unknown executions and refused claims leave nothing behind; a waiting
    claim is counted while it waits and gone when it answers."""
    for n in range(20):
        assert httpx.get(f"{cluster.server_url}/executions/unknown-{n}", params={"wait": 1}).status_code == 404
        assert httpx.post(f"{cluster.server_url}/workers/w/claim", json={"wait": 1}).status_code == 401
    assert metric(cluster.server_url, "flux_long_poll_waiters") == 0
    protocol_worker.register()
    claimer, result = protocol_worker.claim_in_background(wait=2)
    eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") == 1, timeout=5)
    claimer.join(timeout=10)
    assert result["reply"]["executions"] == []
    assert metric(cluster.server_url, "flux_long_poll_waiters") == 0


def test_work_that_met_another_replicas_placement_round_is_placed_once_it_ends_with_a_protocol_worker(
    tmp_path, pg_url, workflow_file
):
    """The placement lock held by "another replica" (here, this test) while the
    submission's round runs: the round finds it taken and places nothing, and the
    submission is claimed after it is released. That it is retried soon after
    (``dispatch.LOCK_RETRY``), not on the next backlog tick a second away, is a figure:
    ``bench.b6_burst --processes 2`` (submit->claimed with two processes on one queue)."""
    import psycopg

    from flux.server.locks import AdvisoryLock

    cluster = LocalCluster(tmp_path / "home", database_url=pg_url)
    worker = None
    try:
        cluster.start_server()
        worker = ProtocolWorker(cluster.server_url, cluster.home, "placed-after-lock", heartbeat_interval=5)
        worker.register()
        with FluxClient(cluster.server_url) as client:
            client.register_file(workflow_file(ONE_TASK))
            for n in range(3):
                worker.claim(wait=0)
                claimer, result = worker.claim_in_background(wait=60)
                eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") == 1, timeout=30)
                with psycopg.connect(pg_url) as other:
                    other.execute(f"SELECT pg_advisory_xact_lock({AdvisoryLock.PLACEMENT.value})")
                    execution = client.run("one_task", n)
                    # the round under way may have begun before the submission; the one after it met the lock
                    rounds = metric(cluster.server_url, ROUNDS)
                    eventually(lambda: metric(cluster.server_url, ROUNDS) > rounds + 1, timeout=30)
                    assert client.execution(execution["id"])["state"] == "SCHEDULED"  # not placed
                # leaving the block commits: the lock is free
                claimer.join(timeout=90)
                assert [job["id"] for job in result["reply"]["executions"]] == [execution["id"]]
                worker.complete(result["reply"]["executions"][0], n)
    finally:
        if worker is not None:
            worker.close()
        cluster.close()
