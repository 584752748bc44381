"""Fleet operations with real processes: slots, drain, restarts, re-sampling, metrics, config."""

from __future__ import annotations

import signal
import time

import httpx
import pytest
from click.testing import CliRunner
from protocol import ROUNDS, metric
from waiting import eventually

from flux.client import FluxClient

SLEEPY = """
    import asyncio
    from flux import task, workflow

    @task
    async def nap(seconds):
        await asyncio.sleep(seconds)
        return seconds

    @workflow
    async def sleepy(ctx):
        return await nap(ctx.input)
"""


def max_overlap(executions: list[dict]) -> int:
    edges = sorted([(e["started_at"], 1) for e in executions] + [(e["finished_at"], -1) for e in executions])
    running = peak = 0
    for _, delta in edges:
        running += delta
        peak = max(peak, running)
    return peak


@pytest.fixture
def sleepy(client, workflow_file):
    client.register_file(workflow_file(SLEEPY))
    return client


def test_slots_hold_under_a_burst_of_50(cluster, sleepy):
    cluster.start_worker("w1", max_concurrent_executions=3, runner="inprocess")
    ids = [sleepy.run("sleepy", 0.05)["id"] for _ in range(50)]
    done = [sleepy.wait(i, 60) for i in ids]
    assert {e["state"] for e in done} == {"COMPLETED"}
    assert max_overlap(done) <= 3
    assert max_overlap(done) >= 2  # it did run concurrently


def test_drain_finishes_running_work_takes_none_and_survives_restart(cluster, sleepy):
    cluster.start_worker("w1", max_concurrent_executions=2)
    running = sleepy.run("sleepy", 1.5)
    eventually(lambda: sleepy.execution(running["id"])["state"] == "RUNNING")
    assert sleepy.drain_worker("w1")["state"] == "DRAINING"
    queued = sleepy.run("sleepy", 0)
    assert sleepy.wait(running["id"], 30)["state"] == "COMPLETED"
    eventually(lambda: sleepy.show_worker("w1")["state"] == "DRAINED")
    assert sleepy.execution(queued["id"])["state"] == "SCHEDULED"

    cluster.stop_server()
    cluster.start_server()
    with FluxClient(cluster.server_url) as again:
        eventually(lambda: again.show_worker("w1")["state"] == "DRAINED")
        # the worker is heard again (it backs off while the server is away): until then it is
        # rightly silent to this server, and undraining it would find it STALE
        eventually(lambda: metric(cluster.server_url, "flux_heartbeats_total") >= 1, 60, "the worker never came back")
        # the queued execution waits (rounds every second): two rounds that could have placed it
        rounds = metric(cluster.server_url, ROUNDS)
        eventually(lambda: metric(cluster.server_url, ROUNDS) >= rounds + 2, 30, "no round ran")
        assert again.execution(queued["id"])["state"] == "SCHEDULED"
        assert again.undrain_worker("w1")["state"] == "ONLINE"
        assert again.wait(queued["id"], 30)["state"] == "COMPLETED"


@pytest.mark.slow
def test_server_killed_and_restarted_loses_no_execution(cluster, sleepy):
    cluster.start_worker("w1", max_concurrent_executions=4, heartbeat_interval=0.2)
    ids = [sleepy.run("sleepy", 1.0)["id"] for _ in range(4)]
    eventually(lambda: all(sleepy.execution(i)["state"] == "RUNNING" for i in ids))
    cluster.stop_server(signal.SIGKILL)
    time.sleep(1.5)  # executions finish while the server is down; the worker keeps their events
    cluster.start_server()
    with FluxClient(cluster.server_url) as again:
        done = [again.wait(i, 30) for i in ids]
        assert {e["state"] for e in done} == {"COMPLETED"}
        for execution in done:
            types = [e["type"] for e in again.events(execution["id"])]
            assert types.count("WORKFLOW_COMPLETED") == 1 and types.count("WORKFLOW_STARTED") == 1
        assert again.run("sleepy", 0, wait=30)["state"] == "COMPLETED"  # claiming resumed
    assert "server call" in cluster.log("worker-w1") and "reachable again after" in cluster.log(
        "worker-w1"
    )  # it says it is back


def test_metrics_endpoint_reports_fleet_queue_and_dispatch(cluster, sleepy):
    queued = sleepy.run("sleepy", 0)
    eventually(lambda: metric(cluster.server_url, "flux_oldest_scheduled_age_seconds") > 0.2, 30, "it never aged")
    text = httpx.get(f"{cluster.server_url}/metrics").text
    assert 'flux_executions{state="SCHEDULED"} 1.0' in text

    cluster.start_worker("w1")
    sleepy.wait(queued["id"], 30)
    text = httpx.get(f"{cluster.server_url}/metrics").text
    assert 'flux_workers{state="ONLINE"} 1.0' in text
    assert 'flux_dispatches_total{worker="w1"} 1.0' in text
    assert "flux_claim_latency_seconds_count 1.0" in text
    assert "flux_oldest_scheduled_age_seconds 0.0" in text
    # per workflow and namespace: how long it queued, and how long it ran (by how it ended)
    assert 'flux_execution_queue_wait_seconds_count{namespace="default",workflow="sleepy"} 1.0' in text
    assert 'flux_execution_duration_seconds_count{namespace="default",state="COMPLETED",workflow="sleepy"} 1.0' in text
    cancelled = sleepy.run("sleepy", 60)
    eventually(lambda: sleepy.execution(cancelled["id"])["state"] == "RUNNING")
    sleepy.cancel(cancelled["id"])
    eventually(lambda: 'state="CANCELLED",workflow="sleepy"} 1.0' in httpx.get(f"{cluster.server_url}/metrics").text)


def test_worker_settings_precedence_flag_over_env_over_toml(tmp_path, monkeypatch):
    """Resolution only: the worker's run loop is replaced, nothing connects anywhere."""
    from flux import cli, worker

    seen = {}

    async def capture(self):
        seen["config"] = self.config

    monkeypatch.setattr(worker.Worker, "run", capture)
    config = tmp_path / "flux.toml"
    config.write_text(
        "[worker]\nmax_concurrent_executions = 7\nheartbeat_interval = 9\n"
        'labels = { region = "us-east-1", gpu = "true" }\n'
    )
    result = CliRunner().invoke(
        cli.main,
        ["--config", str(config), "start", "worker", "w", "--bootstrap-token", "t", "--max-concurrent-executions", "2"],
        env={"FLUX_HEARTBEAT_INTERVAL": "3"},
    )
    assert result.exit_code == 0, result.output
    resolved = seen["config"]
    assert resolved.max_concurrent_executions == 2  # flag beats the file
    assert resolved.heartbeat_interval == 3  # environment beats the file
    assert resolved.labels == {"region": "us-east-1", "gpu": "true"}  # the file beats the default


def test_unknown_setting_in_toml_is_refused(tmp_path):
    from flux import cli

    config = tmp_path / "flux.toml"
    config.write_text("[worker]\nslots = 3\n")
    result = CliRunner().invoke(cli.main, ["--config", str(config), "start", "worker", "w"])
    assert result.exit_code != 0 and "unknown setting(s) slots" in result.output
