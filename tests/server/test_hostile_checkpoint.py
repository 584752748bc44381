"""Hostile checkpoints (issue 31, round two) against real server and worker processes.

A refusal of a worker's report is never silent: a payload nested past the server's
limit fails in the child, naming it; a checkpoint the server still refuses as
malformed fails the attempt with the server's reason instead of being dropped (it was
placed again without counting a crash, forever, re-running the workflow each time).
And one checkpoint's events are capped: their number, type, name and task id.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from flux.client import FluxClient

pytestmark = pytest.mark.integration

DEEP = """
    import os
    from flux import task, workflow

    def nested(levels):
        value = "deep"
        for _ in range(levels):
            value = [value]
        return value

    def ran(path):
        with open(path, "a") as runs:
            runs.write(f"{os.getpid()}\\n")

    @task
    def deep_result(levels):
        return nested(levels)

    @task.with_options(name="LONG_NAME")
    def long_named():
        return 1

    @workflow.with_options(max_attempts=3)
    async def deep_output(ctx):
        ran(ctx.input["runs"])
        return nested(ctx.input["levels"])

    @workflow.with_options(max_attempts=3)
    async def deep_task(ctx):
        ran(ctx.input["runs"])
        return await deep_result(ctx.input["levels"])

    @workflow.with_options(max_attempts=3)
    async def long_task_name(ctx):
        ran(ctx.input["runs"])
        return await long_named()

    @workflow
    async def echo(ctx):
        return ctx.input
""".replace("LONG_NAME", "t" * 200)

#: The server's default --max-json-depth (64) less a checkpoint's 3 levels of wrapping.
PAYLOAD_LEVELS = 61


def _runs(path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_an_output_nested_past_the_limit_fails_once_naming_it_and_other_work_runs(cluster, workflow_file, tmp_path):
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(DEEP))
        cluster.start_worker("w1", max_concurrent_executions=4)
        runs = {n: tmp_path / f"runs-{n}" for n in range(6)}
        # four too deep: on the old code they filled the worker's 4 slots, re-dispatched forever
        deep = [client.run("deep_output", {"runs": str(runs[n]), "levels": PAYLOAD_LEVELS + 1})["id"] for n in range(4)]
        task = client.run("deep_task", {"runs": str(runs[4]), "levels": PAYLOAD_LEVELS + 1})["id"]
        fits = client.run("deep_output", {"runs": str(runs[5]), "levels": PAYLOAD_LEVELS})["id"]
        other = client.run("echo", "other work")["id"]

        ended = [client.wait(execution, 30) for execution in [*deep, task, fits, other]]

    for row in ended[:4]:
        assert row["state"] == "FAILED", row
        assert "the output of workflow 'deep_output' is nested 62 levels; the limit is 61" in row["error"]
        assert row["attempt"] == 1 and row["crashes"] == 0
    assert ended[4]["state"] == "FAILED"
    assert "the result of task 'deep_result' (deep_result:1) is nested 62 levels; the limit is 61" in ended[4]["error"]
    assert ended[5]["state"] == "COMPLETED" and ended[6]["output"] == "other work"
    assert [_runs(runs[n]) for n in range(6)] == [1] * 6  # the workflow code ran once each
    assert "422" not in cluster.log("worker-w1")  # the child caught them: nothing was refused


def test_a_checkpoint_the_server_refuses_fails_the_attempt_with_the_reason(cluster, workflow_file, tmp_path):
    """An event the child does not check (a task name past the events' cap) is refused
    with 422: the worker reports the attempt FAILED with the server's reason."""
    runs = tmp_path / "runs"
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(DEEP))
        cluster.start_worker("w1", max_concurrent_executions=1)
        refused = client.run("long_task_name", {"runs": str(runs)})["id"]
        other = client.run("echo", "still runs")["id"]
        row = client.wait(refused, 30)
        after = client.wait(other, 30)

    assert row["state"] == "FAILED", row
    assert "the server refused this attempt's checkpoint (422)" in row["error"] and "name" in row["error"]
    assert _runs(runs) == 1  # not placed again: the workflow code ran once
    assert after["state"] == "COMPLETED" and after["output"] == "still runs"


def test_a_workflow_with_5000_parallel_tasks_checkpoints_in_capped_batches(cluster, workflow_file):
    source = """
        from flux import task, workflow, parallel

        @task
        async def square(n):
            return n * n

        @workflow
        async def fan_out(ctx):
            return sum(await parallel(*[square(n) for n in range(ctx.input)]))
    """
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(source))
        cluster.start_worker("w1")
        done = client.wait(client.run("fan_out", 5000)["id"], 120)
        events = client.events(done["id"])
    assert done["state"] == "COMPLETED" and done["output"] == sum(n * n for n in range(5000))
    assert sum(event["type"] == "TASK_COMPLETED" for event in events) == 5000


def _event(n: int, **fields) -> dict:
    return {"type": "PROGRESS", "name": "one_task", "task_id": f"echo:{n}", "value": n, "time": time.time(), **fields}


def test_checkpoint_events_are_capped_in_the_documented_shape_with_a_protocol_worker(cluster, hand_claimed):
    worker, job = hand_claimed
    path = f"/executions/{job['id']}/checkpoint"

    def refused(events: list[dict] | bytes, loc: list) -> None:
        if isinstance(events, bytes):  # encoded beforehand: the test's own GIL does not slow /health
            headers = {"Authorization": f"Bearer {worker.token}", "Content-Type": "application/json"}
            response = worker.http.post(path, content=events, headers=headers)
        else:
            response = worker.post(path, {"attempt": job["attempt"], "batch": 1, "events": events})
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["code"] == "validation_error" and body["errors"][0]["loc"] == loc, body

    refused([_event(1, task_id="x" * 100_000)], ["body", "events", 0, "task_id"])
    refused([_event(1, name="x" * 100_000)], ["body", "events", 0, "name"])
    refused([_event(1, type="X" * 100_000)], ["body", "events", 0, "type"])
    refused([_event(n) for n in range(1001)], ["body", "events"])

    # The largest one allowed is stored, and /health is answered while a far larger one is refused.
    largest = [_event(n, name="n" * 128, task_id=f"{'t' * 150}:{n}") for n in range(1000)]
    accepted = worker.post(path, {"attempt": job["attempt"], "batch": 1, "events": largest})
    assert accepted.status_code == 200, accepted.text

    # Every /health meanwhile is answered. How fast (the edge's check runs on a thread; it
    # took the loop for 2-3 s once) is B17.huge_checkpoint's figure (bench/b17_hostile.py).
    answered = []
    body = json.dumps({"attempt": job["attempt"], "batch": 2, "events": [_event(n) for n in range(100_001)]}).encode()
    hostile = threading.Thread(target=refused, args=(body, ["body", "events"]))
    hostile.start()
    with httpx.Client(base_url=cluster.server_url, timeout=30) as probe:
        while hostile.is_alive():
            answered.append(probe.get("/health").status_code)
    hostile.join()
    assert answered and set(answered) == {200}
    with FluxClient(cluster.server_url) as client:
        stored = client.events(job["id"])
    assert sum(event["type"] == "PROGRESS" for event in stored) == 1000
