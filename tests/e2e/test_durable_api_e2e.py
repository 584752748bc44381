"""Fallback, rollback (saga), deterministic builtins, pipeline and map, the task cache and secrets against a
real server and workers, with the worker SIGKILLed at the critical point of each: the
execution still ends correctly and no completed task (fallback, rollback) runs again."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from cryptography.fernet import Fernet

from flux.client import FluxClient
from flux.local import free_port

pytestmark = pytest.mark.integration

SAGA = """
    import pathlib, time
    from flux import now, task, uuid4, workflow

    def note(path, line):
        with open(path, "a") as log:
            log.write(line + "\\n")

    def rescue(log, gate):
        note(log, "rescue")
        return "rescued"

    @task.with_options(fallback=rescue)
    async def fragile(log, gate):
        note(log, "fragile")
        raise RuntimeError("service down")

    def cancel_booking(log, gate, name, result):
        while name == "a" and not pathlib.Path(gate).exists():
            time.sleep(0.05)  # the worker is killed here, mid-rollback
        if name == "c":
            raise RuntimeError("cannot cancel c")  # recorded; the other rollbacks still run
        note(log, f"undo {name} {result}")

    @task.with_options(rollback=cancel_booking)
    async def book(log, gate, name):
        note(log, f"book {name}")
        return f"booking-{name}"

    @workflow.with_options(max_attempts=3)
    async def saga(ctx):
        log, gate = ctx.input["log"], ctx.input["gate"]
        started, ticket = await now(), await uuid4()
        await book(log, gate, "a")
        await book(log, gate, "b")
        await fragile(log, gate)
        await book(log, gate, "c")
        raise RuntimeError(f"payment declined for {ticket} at {started.isoformat()}")
"""


def wait_for_event(client: FluxClient, execution_id: str, seen, timeout: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        events = client.events(execution_id)
        if seen(events):
            return events
        assert time.monotonic() < deadline, f"never happened; events: {[(e['type'], e['task_id']) for e in events]}"
        time.sleep(0.05)


def of(events: list[dict], type_: str) -> list[str]:
    return [e["task_id"] for e in events if e["type"] == type_]


def kill_and_resume(cluster, client: FluxClient, execution_id: str, gate) -> dict:  # noqa: ANN001
    """SIGKILL the worker running it, open the gate it waits at, and let another worker finish it."""
    cluster.kill_worker("doomed")
    gate.touch()
    cluster.start_worker("survivor", heartbeat_interval=0.2)
    return client.wait(execution_id, 60)


def test_saga_rolls_back_in_reverse_and_a_worker_killed_mid_rollback_resumes_without_repeats(
    make_cluster, workflow_file, tmp_path
):
    cluster = make_cluster(eviction_grace_period=1.5)
    log, gate = tmp_path / "effects.log", tmp_path / "gate"
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(SAGA))
        cluster.start_worker("doomed", heartbeat_interval=0.2)
        execution = client.run("saga", {"log": str(log), "gate": str(gate)})
        # after the fallback ran and b and c rolled back, while a's rollback runs
        wait_for_event(client, execution["id"], lambda ev: "book:1" in of(ev, "ROLLBACK_STARTED"))
        done = kill_and_resume(cluster, client, execution["id"], gate)
        events = client.events(execution["id"])

    assert done["state"] == "FAILED" and done["attempt"] == 2, done
    lines = log.read_text().splitlines()
    # every task and the fallback ran once; c's rollback failed and b's ran once; a's finished on the survivor
    assert lines == ["book a", "book b", "fragile", "rescue", "book c", "undo b booking-b", "undo a booking-a"], lines
    assert of(events, "TASK_FALLBACK") == ["fragile:1"]
    assert of(events, "ROLLBACK_STARTED") == ["book:3", "book:2", "book:1", "book:1"]  # a's again: it never ended
    assert of(events, "ROLLBACK_FAILED") == ["book:3"]
    assert of(events, "ROLLBACK_COMPLETED") == ["book:2", "book:1"]
    failed = [e for e in events if e["type"] == "ROLLBACK_FAILED"][0]
    assert "cannot cancel c" in failed["value"]["error"]
    # the builtins were recorded once and replayed: the error of attempt 2 names attempt 1's values
    recorded = {e["task_id"]: e["value"] for e in events if e["type"] == "VALUE_RECORDED"}
    assert sorted(recorded) == ["now:1", "uuid4:1"] and of(events, "VALUE_RECORDED") == ["now:1", "uuid4:1"]
    assert recorded["uuid4:1"] in done["error"] and recorded["now:1"] in done["error"]
    assert [e["type"] for e in events].count("WORKFLOW_FAILED") == 1


CACHED = """
    import asyncio, logging, pathlib
    from flux import TaskFailedError, task, workflow

    def note(path, line):
        with open(path, "a") as log:
            log.write(line + "\\n")

    @task.with_options(cache=True, cache_ttl=3600)
    async def expensive(log, n):
        note(log, f"expensive {n}")
        return n * n

    @task
    async def wait_for(path):
        while not pathlib.Path(path).exists():
            await asyncio.sleep(0.05)
        return "released"

    @task.with_options(secret_requests=["API_TOKEN"])
    def use_token(log, secrets):
        print("token is", secrets["API_TOKEN"])
        logging.getLogger("app").warning("calling with %s", secrets["API_TOKEN"])
        note(log, "token used")
        return len(secrets["API_TOKEN"])

    @task.with_options(secret_requests=["API_TOKEN"])
    def leak(secrets):
        raise ValueError("rejected " + secrets["API_TOKEN"])

    @workflow.with_options(max_attempts=3)
    async def cached(ctx):
        log = ctx.input["log"]
        square = await expensive(log, 7)
        await wait_for(ctx.input["gate"])
        used = await use_token(log)
        try:
            await leak()
        except TaskFailedError as exc:
            return {"square": square, "used": used, "error": str(exc)}
"""

SECRET = "s3cr3t-VALUE-4b1d"


def flux(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "flux.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow  # over ~20 s: CI's second step
def test_cache_survives_a_kill_after_its_write_and_secrets_reach_only_the_task(make_cluster, workflow_file, tmp_path):
    key_file = tmp_path / "secrets.key"
    key_file.write_text(Fernet.generate_key().decode())
    cluster = make_cluster(eviction_grace_period=1.5, server_args=("--secrets-key-file", str(key_file)))
    log, gate = tmp_path / "effects.log", tmp_path / "gate"
    server = ("--server-url", cluster.server_url)
    set_secret = flux("secret", "set", "API_TOKEN", *server, stdin=SECRET + "\n")
    assert set_secret.returncode == 0, set_secret.stderr
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(CACHED))
        cluster.start_worker("doomed", heartbeat_interval=0.2)
        first = client.run("cached", {"log": str(log), "gate": str(gate)})
        # the cache entry is written (with the task's completion), the workflow not yet complete
        wait_for_event(client, first["id"], lambda ev: "expensive:1" in of(ev, "TASK_CACHE_STORED"))
        done = kill_and_resume(cluster, client, first["id"], gate)
        second = client.run("cached", {"log": str(log), "gate": str(gate)}, wait=60)
        cleared = flux("cache", "clear", "--task", "expensive", "--format", "json", *server)
        third = client.run("cached", {"log": str(log), "gate": str(gate)}, wait=60)
        responses = [client.events(e["id"]) for e in (done, second, third)]
        responses += [list(client.logs(e["id"])) for e in (done, second, third)]
        responses += [client.execution(e["id"]) for e in (done, second, third)]
        responses += [client.list_secrets(), client.list_executions(limit=10)]
        listed = flux("secret", "list", "--format", "json", *server)
        metrics = __import__("httpx").get(f"{cluster.server_url}/metrics").text

    assert done["state"] == "COMPLETED" and done["attempt"] == 2, done
    assert done["output"]["square"] == 49 and done["output"]["used"] == len(SECRET)
    assert done["output"]["error"].endswith("ValueError: rejected ***"), done["output"]
    assert second["state"] == third["state"] == "COMPLETED"
    # ran in attempt 1 (cached), replayed in attempt 2, a cache hit for the second run, run again after the clear
    assert log.read_text().splitlines().count("expensive 7") == 2
    assert of(responses[1], "TASK_CACHE_HIT") == ["expensive:1"] and "expensive:1" not in of(
        responses[1], "TASK_STARTED"
    )
    assert json.loads(cleared.stdout) == {"deleted": 1}, cleared.stderr
    assert "expensive:1" in of(responses[2], "TASK_STARTED")
    assert 'flux_cache_lookups_total{result="hit"} 1.0' in metrics
    # what the task printed and logged reached the logs, masked
    messages = [line["message"] for line in responses[3]]
    assert any(m == "token is ***" for m in messages), messages
    assert any("calling with ***" in m for m in messages), messages
    assert "API_TOKEN" in listed.stdout and "value" not in json.loads(listed.stdout)[0]
    # the value is nowhere: API answers, the database file, the server's and workers' logs
    assert SECRET not in json.dumps(responses) + listed.stdout
    cluster.close()
    stored = b"".join(p.read_bytes() for p in cluster.home.glob("flux.db*"))
    assert stored and SECRET.encode() not in stored
    for name in ("server", "worker-doomed", "worker-survivor"):
        assert SECRET not in cluster.log(name), name
    # a server whose database holds secrets refuses to start without their key (its home's own does not decrypt them)
    refused = flux("start", "server", "--home", str(cluster.home), "--port", str(free_port()))
    assert refused.returncode == 1 and "does not decrypt the stored secrets" in refused.stderr, refused.stderr


COMPOSED = """
    import asyncio, json, pathlib
    from flux import map, pipeline, task, workflow

    def note(path, line):
        with open(path, "a") as log:
            log.write(line + "\\n")

    @task
    async def parse(args):
        note(args["log"], "parse")
        return [args | {"n": n} for n in range(args["items"])]

    @task
    async def square(item):
        if item["n"] == 3:  # the worker is killed while this one waits; 0-2 have completed
            while not pathlib.Path(item["gate"]).exists():
                await asyncio.sleep(0.05)
        note(item["log"], f"square {item['n']}")
        return item["n"] ** 2

    @task
    async def total(values):
        return sum(values)

    @workflow.with_options(max_attempts=3)
    async def composed(ctx):
        items = await pipeline(parse, input=ctx.input)
        squares = await map(square, items, concurrency=1)
        return await pipeline(total, input=squares)
"""


def test_pipeline_and_map_resume_after_a_kill_mid_map_without_rerunning_completed_items(
    make_cluster, workflow_file, tmp_path
):
    cluster = make_cluster(eviction_grace_period=1.5)
    log, gate = tmp_path / "effects.log", tmp_path / "gate"
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(COMPOSED))
        cluster.start_worker("doomed", heartbeat_interval=0.2)
        execution = client.run("composed", {"log": str(log), "gate": str(gate), "items": 5})
        wait_for_event(client, execution["id"], lambda ev: "square:4" in of(ev, "TASK_STARTED"))  # item 3 of map
        done = kill_and_resume(cluster, client, execution["id"], gate)
        events = client.events(execution["id"])

    assert done["state"] == "COMPLETED" and done["output"] == sum(n * n for n in range(5)), done
    assert done["attempt"] == 2
    lines = log.read_text().splitlines()
    assert lines == ["parse", "square 0", "square 1", "square 2", "square 3", "square 4"], lines  # each once
    assert of(events, "TASK_COMPLETED") == [
        "parse:1",
        "square:1",
        "square:2",
        "square:3",
        "square:4",
        "square:5",
        "total:1",
    ]
