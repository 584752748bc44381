"""Clean shutdown with real processes: a stop signal ends the server and the worker
with status 0 and nothing alarming in their logs, even mid long poll."""

from __future__ import annotations

import signal
import threading

import httpx
import pytest
from protocol import metric
from waiting import eventually

from flux.local import LocalCluster

SOURCE = """
    from flux import workflow

    @workflow.with_options(affinity={"pool": "nobody"})
    async def stranded(ctx):
        return 1
"""


def assert_quiet(log: str) -> None:
    """No error: in particular not uvicorn's "timeout graceful shutdown exceeded", which
    it logs when it had to cut requests off (long polls waited out, not answered)."""
    assert "ERROR" not in log and "Traceback" not in log, log[-3000:]
    assert "graceful shutdown exceeded" not in log, log[-3000:]


def parked(server_url: str, at_least: int) -> bool:
    """At least this many long polls (claims, waits) wait on the server process that answers."""
    return metric(server_url, "flux_long_poll_waiters") >= at_least


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
    eventually(lambda: parked(cluster.server_url, 2), timeout=30)  # the worker's claim and the client's wait

    cluster.server.send_signal(sig)
    # well before the 60 s wait: answered, not waited out (how soon: B49.server_stop_s)
    assert cluster.server.wait(timeout=15) == 0
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
        eventually(lambda: parked(cluster.server_url, 1), timeout=30)
        cluster.server.send_signal(signal.SIGTERM)
        # long polls ended, not cut off at uvicorn's graceful timeout (3 s; assert_quiet)
        assert cluster.server.wait(timeout=15) == 0
        cluster.server = None
        assert_quiet(cluster.log("server"))
    finally:
        cluster.close()


def test_worker_stops_cleanly_while_it_long_polls(cluster):
    worker = cluster.start_worker("w1", heartbeat_interval=0.5)
    eventually(lambda: parked(cluster.server_url, 1), timeout=30)  # its claim
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0
    del cluster.workers["w1"]
    assert_quiet(cluster.log("worker-w1"))
    assert httpx.get(f"{cluster.server_url}/workers/w1", timeout=5).json()["state"] == "OFFLINE"
    assert_quiet(cluster.log("server"))
