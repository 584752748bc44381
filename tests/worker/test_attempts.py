"""Crashes and shutdowns never fail, lose or double-run work (issue 13).

Every test runs real server and worker processes. Side effects go to files, each
line saying which attempt wrote it and when, so "no completed task ran twice" and
"the fenced attempt wrote nothing late" are read off the disk.
"""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import psutil
import pytest
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

#: ``first`` is recorded, then ``crash`` breaks the attempt named in the input (once,
#: or every time), then ``last`` is recorded. The log shows which task ran in which attempt.
CRASHING = """
    import ctypes, os, pathlib, signal, time
    from flux import current_task, task, workflow

    def note(path, what):
        call = current_task()
        with open(path, "a") as log:
            log.write(f"{what} {call.attempt} {call.task_id} {time.time()}\\n")

    @task
    def record(path, what):
        note(path, what)
        return what

    @task
    def crash(path, how, times):
        call = current_task()
        if call.attempt <= times:
            note(path, "crashing")
            if how == "exit":
                os._exit(3)
            if how == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            if how == "memory":
                hog = bytearray(4 * 1024**3)
        return call.attempt

    @workflow.with_options(max_attempts=2)
    async def crashing(ctx):
        path = ctx.input["log"]
        first = await record(path, "first")
        survived = await crash(path, ctx.input["how"], ctx.input.get("times", 1))
        last = await record(path, "last")
        return {"first": first, "survived_on": survived, "last": last, "attempt": ctx.attempt}
"""


def _lines(path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def _ended(events: list[dict]) -> list[dict]:
    return [e["value"] for e in events if e["type"] == "ATTEMPT_ENDED"]


@pytest.fixture
def fast_cluster(make_cluster):
    """Short eviction grace and backoff: crashes are recovered in about a second."""
    return make_cluster(eviction_grace_period=2.0, server_args=("--attempt-backoff", "0.2"))


@pytest.mark.parametrize(
    ("how", "cause"),
    [("exit", "child process exited with status 3"), ("segv", "child process killed by signal SIGSEGV")],
)
def test_a_child_that_dies_ends_the_attempt_and_the_execution_completes_on_replay(
    fast_cluster, workflow_file, tmp_path, how, cause
):
    log = tmp_path / "side-effects.log"
    fast_cluster.start_worker("w1", heartbeat_interval=0.2)
    with FluxClient(fast_cluster.server_url) as client:
        client.register_file(workflow_file(CRASHING))
        execution = client.run("crashing", {"log": str(log), "how": how})
        done = client.wait(execution["id"], 60)
        events = client.events(execution["id"])
        explained = client.placement(execution["id"])

    assert done["state"] == "COMPLETED", done
    assert done["output"] == {"first": "first", "survived_on": 2, "last": "last", "attempt": 2}
    assert done["attempt"] == 2 and done["crashes"] == 1 and done["max_attempts"] == 2
    # 'first' completed in attempt 1 and was replayed, not run again
    assert [line[:2] for line in _lines(log)] == [["first", "1"], ["crashing", "1"], ["last", "2"]]
    assert _types(events).count("ATTEMPT_STARTED") == 2
    ended = _ended(events)
    assert [(e["attempt"], e["end"], e["counted"]) for e in ended] == [(1, "child_died", True), (2, "finished", False)]
    assert ended[0]["cause"] == cause
    assert [(a["attempt"], a["end"]) for a in explained["attempts"]] == [(1, "child_died"), (2, "finished")]
    assert explained["crashes"] == 1 and explained["max_attempts"] == 2


def test_attempts_run_out_and_the_execution_fails_with_the_cause_named(fast_cluster, workflow_file, tmp_path):
    log = tmp_path / "side-effects.log"
    fast_cluster.start_worker("w1", heartbeat_interval=0.2)
    with FluxClient(fast_cluster.server_url) as client:
        client.register_file(workflow_file(CRASHING))
        execution = client.run("crashing", {"log": str(log), "how": "exit", "times": 99})
        done = client.wait(execution["id"], 60)
        events = client.events(execution["id"])

    assert done["state"] == "FAILED"
    assert "child process exited with status 3" in done["error"] and "2 of 2 attempts crashed" in done["error"]
    assert [e["end"] for e in _ended(events)] == ["child_died", "child_died"]
    assert _types(events)[-1] == "WORKFLOW_FAILED"
    assert [line[0] for line in _lines(log)].count("first") == 1  # replayed in attempt 2


def test_the_memory_ceiling_ends_the_attempt_and_names_the_limit(make_cluster, workflow_file, tmp_path):
    cluster = make_cluster(server_args=("--attempt-backoff", "0.2"))
    cluster.start_worker("capped", heartbeat_interval=0.2, extra_args=("--subprocess-memory-limit", "1Gi"))
    log = tmp_path / "side-effects.log"
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(CRASHING))
        once = client.run("crashing", {"log": str(log), "how": "memory", "times": 1})
        always = client.run("crashing", {"log": str(log), "how": "memory", "times": 99})
        recovered, failed = client.wait(once["id"], 60), client.wait(always["id"], 60)
        ended = _ended(client.events(once["id"]))

    assert recovered["state"] == "COMPLETED" and recovered["attempt"] == 2
    assert ended[0]["end"] == "memory_limit" and ended[0]["cause"].startswith("memory limit 1 GiB exceeded")
    assert failed["state"] == "FAILED" and failed["error"].startswith("memory limit 1 GiB exceeded")
    assert "MemoryError" in failed["error"]


LONG = """
    import asyncio, time
    from flux import current_task, task, workflow

    @task
    async def record(path, what):
        with open(path, "a") as out:
            out.write(f"{what} {current_task().attempt}\\n")
        return what

    @task
    async def work(seconds):
        await asyncio.sleep(seconds)
        return current_task().attempt

    @task
    async def append(path, seconds, first_seconds):
        attempt = current_task().attempt
        until = time.time() + (first_seconds if attempt == 1 else seconds)
        while time.time() < until:
            with open(path, "a") as out:
                out.write(f"{attempt} {time.time()}\\n")
            await asyncio.sleep(0.1)
        return attempt

    @workflow
    async def long_one(ctx):
        await record(ctx.input["log"], "first")
        on = await work(ctx.input["seconds"])
        await record(ctx.input["log"], "last")
        return on

    @workflow
    async def appender(ctx):
        first = await record(ctx.input["marks"], "first")
        on = await append(ctx.input["log"], ctx.input["seconds"], ctx.input["first_seconds"])
        return {"first": first, "appended_on_attempt": on}
"""


def _appended(path) -> list[tuple[int, float]]:
    return [(int(a), float(t)) for a, t in (line.split() for line in path.read_text().splitlines())]


def test_children_die_with_a_sigkilled_worker_and_the_attempt_resumes_elsewhere(fast_cluster, workflow_file, tmp_path):
    log, marks = tmp_path / "appended.log", tmp_path / "marks.log"
    fast_cluster.start_worker("doomed", heartbeat_interval=0.2, max_concurrent_executions=1)
    with FluxClient(fast_cluster.server_url) as client:
        client.register_file(workflow_file(LONG))
        # the first attempt's task would append for two minutes; the second's for 3 s
        execution = client.run("appender", {"log": str(log), "marks": str(marks), "seconds": 3, "first_seconds": 120})
        eventually(lambda: log.exists() and len(log.read_text().splitlines()) >= 5, 30, "the task never appended")
        children = psutil.Process(fast_cluster.workers["doomed"].pid).children(recursive=True)
        assert children  # the task runs in one
        fast_cluster.workers["doomed"].send_signal(signal.SIGKILL)  # the worker alone, not its children
        fast_cluster.workers.pop("doomed").wait(10)
        _, alive = psutil.wait_procs(children, timeout=60)  # well before the task's 120 s would end it
        assert alive == [], f"{len(alive)} child(ren) outlived their SIGKILLed worker"
        fast_cluster.start_worker("survivor", heartbeat_interval=0.2)
        done = client.wait(execution["id"], 60)
        events = client.events(execution["id"])

    assert done["state"] == "COMPLETED" and done["worker_name"] == "survivor"
    assert done["output"] == {"first": "first", "appended_on_attempt": 2}
    attempts = [attempt for attempt, _ in _appended(log)]
    assert attempts == sorted(attempts) and attempts[-1] == 2  # nothing of the first attempt once the second began
    assert marks.read_text().count("first") == 1
    lost = _ended(events)[0]
    assert lost["end"] == "worker_lost" and "doomed" in lost["cause"]


def _start_long_one(cluster, client, workflow_file, log, seconds: int, drain_timeout: int | None = None) -> dict:
    """Worker w1 (with this drain timeout) running ``long_one``, past its first task."""
    extra = ("--drain-timeout", str(drain_timeout)) if drain_timeout is not None else ()
    cluster.start_worker("w1", heartbeat_interval=0.2, extra_args=extra)
    client.register_file(workflow_file(LONG))
    execution = client.run("long_one", {"log": str(log), "seconds": seconds})
    eventually(lambda: log.exists(), 30, "the execution never started")
    # its first task is recorded, not only run: a server stopped now has it
    eventually(
        lambda: any(e["type"] == "TASK_COMPLETED" for e in client.events(execution["id"])),
        30,
        "the first task was never recorded",
    )
    return execution


def test_sigterm_lets_a_short_execution_finish_then_the_worker_exits_0(cluster, workflow_file, tmp_path):
    log = tmp_path / "marks.log"
    with FluxClient(cluster.server_url) as client:
        execution = _start_long_one(cluster, client, workflow_file, log, 2, drain_timeout=20)
        status = cluster.stop_worker("w1", signal.SIGTERM)
        done = client.wait(execution["id"], 30)
        worker = client.show_worker("w1")

    assert status == 0
    assert done["state"] == "COMPLETED" and done["attempt"] == 1 and done["worker_name"] == "w1"
    assert worker["state"] == "OFFLINE" and worker["running"] == 0


def test_sigterm_past_the_drain_timeout_hands_the_execution_back_to_resume_elsewhere(cluster, workflow_file, tmp_path):
    log = tmp_path / "marks.log"
    with FluxClient(cluster.server_url) as client:
        execution = _start_long_one(cluster, client, workflow_file, log, 4, drain_timeout=1)
        status = cluster.stop_worker("w1", signal.SIGTERM)
        handed_back = client.execution(execution["id"])
        cluster.start_worker("w2", heartbeat_interval=0.2)
        done = client.wait(execution["id"], 30)
        events = client.events(execution["id"])

    assert status == 0  # and its task did not finish there: "last 1" is not in the log (below)
    assert handed_back["state"] == "SCHEDULED"  # back in the queue at once, not after an eviction
    assert done["state"] == "COMPLETED" and done["worker_name"] == "w2" and done["output"] == 2
    drained = _ended(events)[0]
    assert drained["end"] == "drained" and drained["counted"] is False and "deadline (1 s)" in drained["cause"]
    assert done["crashes"] == 0
    assert log.read_text().splitlines() == ["first 1", "last 2"]


def test_a_second_signal_stops_the_worker_at_once_and_the_work_still_resumes(cluster, workflow_file, tmp_path):
    log = tmp_path / "marks.log"
    with FluxClient(cluster.server_url) as client:
        execution = _start_long_one(cluster, client, workflow_file, log, 3, drain_timeout=60)
        process = cluster.workers.pop("w1")
        process.send_signal(signal.SIGTERM)
        eventually(lambda: "SIGTERM: draining" in cluster.log("worker-w1"), 30, "the first signal was never heard")
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=30)
        cluster.start_worker("w2", heartbeat_interval=0.2)
        done = client.wait(execution["id"], 30)

    assert status == 0 and "second SIGTERM: stopping at once" in cluster.log("worker-w1")
    assert done["state"] == "COMPLETED" and done["worker_name"] == "w2"
    assert log.read_text().splitlines() == ["first 1", "last 2"]  # w1 did not wait for its 3 s task


@pytest.mark.slow
def test_a_worker_that_cannot_reach_the_server_stops_at_once_and_its_work_resumes(
    make_cluster, workflow_file, tmp_path
):
    cluster = make_cluster(eviction_grace_period=2.0)
    log = tmp_path / "marks.log"
    with FluxClient(cluster.server_url) as client:
        execution = _start_long_one(cluster, client, workflow_file, log, 3, drain_timeout=60)
    failures = cluster.log("worker-w1").count("retrying")
    cluster.stop_server(signal.SIGKILL)
    # a call fails: the worker knows the server is away
    eventually(lambda: cluster.log("worker-w1").count("retrying") > failures, 30, "no call failed")
    status = cluster.stop_worker("w1", signal.SIGTERM, timeout=30)
    cluster.start_server()
    cluster.start_worker("w2", heartbeat_interval=0.2)
    with FluxClient(cluster.server_url) as client:
        done = client.wait(execution["id"], 60)

    assert status == 0  # within stop_worker's 30 s: not its 60 s drain timeout
    assert done["state"] == "COMPLETED" and done["worker_name"] == "w2"
    assert log.read_text().splitlines() == ["first 1", "last 2"]  # w1 did not wait for its 3 s task


def test_flux_worker_drain_wait_returns_when_the_worker_is_empty(cluster, workflow_file, tmp_path):
    import subprocess
    import sys

    log = tmp_path / "marks.log"
    with FluxClient(cluster.server_url) as client:
        execution = _start_long_one(cluster, client, workflow_file, log, 2)
        drained = subprocess.run(
            [
                sys.executable,
                "-m",
                "flux.cli",
                "worker",
                "drain",
                "w1",
                "--wait",
                "--timeout",
                "30",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "FLUX_SERVER_URL": cluster.server_url},
        )
        finished = client.execution(execution["id"])

    assert drained.returncode == 0, drained.stderr
    assert json.loads(drained.stdout)["state"] == "DRAINED" and "runs nothing" in drained.stderr
    assert finished["state"] == "COMPLETED"  # it returned only once the work was done


def test_a_waiting_execution_is_placed_as_soon_as_a_fitting_worker_registers(cluster, workflow_file):
    source = """
        from flux import workflow

        @workflow.with_options(affinity={"pool": "special"})
        async def picky(ctx):
            return "placed"
    """
    cluster.start_worker("plain", heartbeat_interval=0.2)
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(source))
        execution = client.run("picky")
        eventually(lambda: client.execution(execution["id"])["placement_note"], 10, "never explained")
        cluster.start_worker("special", labels={"pool": "special"}, heartbeat_interval=0.2, wait=False)
        done = client.wait(execution["id"], 30)

    assert done["state"] == "COMPLETED" and done["worker_name"] == "special"


def test_relaxing_a_workflow_rescues_executions_already_waiting(cluster, workflow_file):
    strict = """
        from flux import workflow

        @workflow.with_options(affinity={"pool": "nowhere"})
        async def relaxable(ctx):
            return "strict"
    """
    relaxed = strict.replace('.with_options(affinity={"pool": "nowhere"})', "").replace('"strict"', '"relaxed"')
    cluster.start_worker("w1", heartbeat_interval=0.2)
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(strict))
        waiting = client.run("relaxable")
        pinned = client.run("relaxable", version=1)
        eventually(lambda: client.execution(waiting["id"])["placement_note"], 10, "never explained")
        client.register_file(workflow_file(relaxed, "relaxed.py"))
        done = client.wait(waiting["id"], 10)
        still = client.execution(pinned["id"])

    assert done["state"] == "COMPLETED" and done["output"] == "relaxed" and done["workflow_version"] == 2
    assert still["state"] == "SCHEDULED" and still["workflow_version"] == 1  # asked for version 1: kept


def test_a_superseded_attempt_is_fenced_on_checkpoint_and_heartbeat_with_a_protocol_worker(cluster, hand_claimed):
    worker, job = hand_claimed
    worker.register()  # a restart that does not report it: the attempt ends (worker lost)
    stale = worker.post(
        f"/executions/{job['id']}/checkpoint",
        {"attempt": job["attempt"], "batch": 1, "events": [{"type": "WORKFLOW_STARTED", "time": time.time()}]},
    )
    beat = worker.heartbeat(running=[job["id"]])
    with FluxClient(cluster.server_url) as client:
        row = client.execution(job["id"])

    assert stale.status_code == 409 and stale.json()["code"] == "conflict"
    assert beat["abandon"] == [job["id"]]
    assert row["state"] == "SCHEDULED" and row["crashes"] == 1


def test_a_worker_may_not_report_ends_that_are_the_servers_to_find_with_a_protocol_worker(cluster, hand_claimed):
    worker, job = hand_claimed
    reply = worker.post(
        f"/executions/{job['id']}/checkpoint",
        {
            "attempt": job["attempt"],
            "batch": 1,
            "events": [{"type": "ATTEMPT_ENDED", "value": {"end": "finished", "cause": "x"}, "time": time.time()}],
        },
    )
    assert reply.status_code == 422 and "child_died" in reply.json()["detail"]
    assert httpx.get(f"{cluster.server_url}/health").status_code == 200


def test_a_worker_killed_before_saving_its_new_token_restarts_as_itself_with_a_protocol_worker(cluster):
    """Found by bench B8: killed after the server issued a new session token but before
    the worker saved it, a restart presents the previous one; it must not wait for an
    eviction to get its name back."""
    from protocol import ProtocolWorker

    worker = ProtocolWorker(cluster.server_url, cluster.home, "restarting", heartbeat_interval=5)
    stranger = ProtocolWorker(cluster.server_url, cluster.home, "restarting", heartbeat_interval=5)
    try:
        worker.register()
        saved = worker.token
        worker.register()  # the server issues a new token; the worker "dies" before saving it
        worker.token = saved
        worker.register()  # the restart, with the token on its disk
        with pytest.raises(httpx.HTTPStatusError) as refused:
            stranger.register()  # no token at all: still someone else
    finally:
        worker.close()
        stranger.close()
    assert refused.value.response.status_code == 409
