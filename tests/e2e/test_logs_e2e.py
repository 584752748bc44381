"""Logs end to end (issue 14): a real worker captures, ships, the server keeps, a
client reads; a worker killed mid-run leaves what it had shipped."""

from __future__ import annotations

import signal

from waiting import eventually

from flux.client import FluxClient

CHATTY = """
    import logging, subprocess, sys, time
    from flux import task, workflow

    log = logging.getLogger("chatty")

    @task
    def talk(n):
        for i in range(n):
            print(f"line {i}")
        print("to stderr", file=sys.stderr)
        log.warning("careful: %s", n)
        subprocess.run(["echo", "from a subprocess"], check=True)
        try:
            1 / 0
        except ZeroDivisionError:
            log.exception("caught it")
        return n

    @task
    def boom():
        raise RuntimeError("the task fails")

    @task
    def linger(path, seconds):
        for i in range(int(seconds * 10)):
            print(f"tick {i}", flush=True)
            time.sleep(0.1)
        return seconds

    @workflow
    async def chatty(ctx):
        print("the workflow body speaks")
        await talk(ctx.input)
        await boom()

    @workflow
    async def lingering(ctx):
        return await linger(ctx.input["path"], ctx.input["seconds"])
"""


def test_prints_logs_errors_and_subprocess_output_are_complete_and_ordered(cluster, workflow_file):
    cluster.start_worker("w1")
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(CHATTY))
        done = client.run("chatty", 200, wait=60)
        lines = list(client.logs(done["id"]))
    assert done["state"] == "FAILED"
    stdout = [line["message"] for line in lines if line["stream"] == "stdout" and line["task_id"] == "talk:1"]
    assert stdout == [f"line {i}" for i in range(200)]  # complete and in order
    messages = {(line["stream"], line["task_id"], line["message"].splitlines()[0]) for line in lines}
    assert ("stdout", None, "the workflow body speaks") in messages
    assert ("stderr", "talk:1", "to stderr") in messages
    assert ("stdout", None, "from a subprocess") in messages  # fd 1 of a child process
    warning = next(line for line in lines if line["stream"] == "log" and line["message"] == "careful: 200")
    assert (warning["level"], warning["logger"], warning["task_id"]) == ("WARNING", "chatty", "talk:1")
    caught = next(line for line in lines if line["stream"] == "log" and line["message"].startswith("caught it"))
    assert "ZeroDivisionError" in caught["message"] and caught["level"] == "ERROR"
    assert [line["seq"] for line in lines] == sorted(line["seq"] for line in lines)
    assert all(line["attempt"] == 1 for line in lines)


def test_a_worker_killed_mid_run_keeps_the_lines_it_had_shipped(make_cluster, workflow_file, tmp_path):
    cluster = make_cluster(eviction_grace_period=2.0)
    cluster.start_worker("doomed", heartbeat_interval=0.2)
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(CHATTY))
        execution = client.run("lingering", {"path": str(tmp_path), "seconds": 30})
        eventually(lambda: len(list(client.logs(execution["id"]))) >= 10, 30, "no lines arrived while it ran")
        cluster.workers["doomed"].send_signal(signal.SIGKILL)
        cluster.workers.pop("doomed").wait(10)
        kept = list(client.logs(execution["id"]))  # a dead worker sends no more: whatever is there is kept
        client.cancel(execution["id"])
    ticks = [line["message"] for line in kept if line["stream"] == "stdout"]
    assert len(ticks) >= 10 and ticks == [f"tick {i}" for i in range(len(ticks))]
