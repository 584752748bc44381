"""Clean shutdown with real processes: a stop signal ends the server and the worker
with status 0 and nothing alarming in their logs, even mid long poll."""

from __future__ import annotations

import signal
import threading
import time

import httpx
import pytest

from flux.local import LocalCluster

SOURCE = """
    from flux import workflow

    @workflow.with_options(affinity={"pool": "nobody"})
    async def stranded(ctx):
        return 1
"""


def assert_quiet(log: str) -> None:
    assert "ERROR" not in log and "Traceback" not in log, log[-3000:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_server_stops_cleanly_while_a_worker_and_a_client_long_poll(cluster, client, workflow_file, sig):
    cluster.start_worker("w1", heartbeat_interval=0.5)
    client.register_file(workflow_file(SOURCE))
    execution = client.run("stranded")  # no worker matches: it stays SCHEDULED
    answers: list[httpx.Response] = []
    waiter = threading.Thread(
        target=lambda: answers.append(
            httpx.get(f"{cluster.server_url}/executions/{execution['id']}", params={"wait": 60}, timeout=90)
        )
    )
    waiter.start()
    time.sleep(1.0)  # the worker's claim and the client's wait are both parked on the server

    started = time.monotonic()
    cluster.server.send_signal(sig)
    assert cluster.server.wait(timeout=15) == 0
    assert time.monotonic() - started < 2.5  # long polls answered at once, not waited out
    cluster.server = None
    waiter.join(timeout=10)
    assert answers and answers[0].status_code == 200 and answers[0].json()["state"] == "SCHEDULED"
    assert_quiet(cluster.log("server"))


@pytest.mark.slow  # over ~20 s: CI's second step
def test_several_server_processes_stop_cleanly_while_workers_long_poll(tmp_path, pg_url):
    """``--processes 2``: uvicorn's process manager builds the servers in each process;
    a stop still ends their long polls at once, with no traceback for each."""
    cluster = LocalCluster(tmp_path / "home", database_url=pg_url)
    try:
        cluster.start_server(extra_args=("--processes", "2"))
        for name in ("w1", "w2", "w3", "w4"):  # claims parked on both processes, most likely
            cluster.start_worker(name, runner="inprocess", heartbeat_interval=0.5)
        time.sleep(1.0)
        started = time.monotonic()
        cluster.server.send_signal(signal.SIGTERM)
        assert cluster.server.wait(timeout=15) == 0
        assert time.monotonic() - started < 2.5  # not uvicorn's graceful timeout (3 s)
        cluster.server = None
        assert_quiet(cluster.log("server"))
    finally:
        cluster.close()


def test_worker_stops_cleanly_while_it_long_polls(cluster):
    worker = cluster.start_worker("w1", heartbeat_interval=0.5)
    time.sleep(1.0)  # its claim is parked on the server
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0
    del cluster.workers["w1"]
    assert_quiet(cluster.log("worker-w1"))
    assert httpx.get(f"{cluster.server_url}/workers/w1", timeout=5).json()["state"] == "OFFLINE"
    assert_quiet(cluster.log("server"))
