"""The worker ships each attempt's log lines (docs/logs.md, "Shipping").

Through a real server and a real worker process where the server shows it: every line
of a burst stored in order (the server refuses a batch that skips a number, so a gap
would lose lines), a trickle stored while the execution still runs, the byte cap's
note. Against a fake server (``FakeServer``, ``Worker.call``'s shape) where only the
wire shows it, and the tests say so in their names: how many lines each batch holds,
a server that does not answer yet (back-pressure), refusals a real server of this
version never gives (an older server without the route, a bug), and the order of the
requests (the real server keeps lines that arrive after the closing checkpoint, so
only the wire shows they came before it).
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from waiting import eventually

from flux.domain.events import EventType
from flux.model.runtime import make_event
from flux.worker import logs as logs_module
from flux.worker.logs import LogShipper
from flux.worker.runners.base import Job, Runner, Stop
from flux.worker.running import Executions


def line(message: str, stream: str = "stdout") -> dict:
    return {"time": 1.0, "stream": stream, "task_id": None, "level": None, "logger": None, "message": message}


def refusal(status: int, body: dict) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://server/executions/e1/logs")
    return httpx.HTTPStatusError(
        "refused", request=request, response=httpx.Response(status, json=body, request=request)
    )


async def until(condition, timeout: float = 10.0) -> None:
    """Yield to the loop until ``condition()`` holds (the fake's and the shipper's tasks run meanwhile)."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


class FakeServer:
    """``Worker.call``'s shape; records every request, answers checkpoints, and answers
    log batches with ``logs_answer`` (an exception to raise, or None to accept)."""

    def __init__(self, logs_answer: Exception | None = None, delay: float = 0.0):
        self.requests: list[tuple[str, dict]] = []
        self.logs_answer, self.delay = logs_answer, delay
        self.gate = asyncio.Event()
        self.gate.set()
        #: Requests waiting for the gate to open.
        self.held = 0

    async def call(self, path: str, body: dict, timeout: float | None = None, reply: type | None = None):  # noqa: ANN201
        self.held += 1
        await self.gate.wait()
        self.held -= 1
        await asyncio.sleep(self.delay)
        self.requests.append((path, body))
        if path.endswith("/logs"):
            if self.logs_answer is not None:
                raise self.logs_answer
            answer = {"accepted": len(body["lines"])}
        else:
            answer = {"state": "RUNNING", "cancel": False}
        return answer if reply is None else reply.model_validate(answer)

    def batches(self) -> list[dict]:
        return [body for path, body in self.requests if path.endswith("/logs")]

    def paths(self) -> list[str]:
        return [path.rsplit("/", 1)[1] for path, _ in self.requests]


CHATTY = """
    import time
    from pathlib import Path

    from flux import task, workflow

    @task
    def burst(n):
        for i in range(n):
            print(f"line {i}")
        return n

    @task
    def trickle(gate):
        print("one", flush=True)
        print("two", flush=True)
        while not Path(gate).exists():
            time.sleep(0.05)
        return "opened"

    @task
    def overflow():
        for _ in range(10):
            print("x" * 30)
        print("later")
        return "done"

    @workflow
    async def bursting(ctx):
        return await burst(ctx.input)

    @workflow
    async def trickling(ctx):
        return await trickle(ctx.input)

    @workflow
    async def overflowing(ctx):
        return await overflow()
"""


def stored(client, execution_id: str) -> tuple[list[dict], bool]:
    """Every line the server stored for the execution, in order, and its ``truncated`` flag."""
    lines, after = [], 0
    while True:
        page = client.logs_page(execution_id, after=after, limit=1000)
        lines += page["lines"]
        if not page["lines"]:
            return lines, page["truncated"]
        after = page["next_after"]


@pytest.fixture
def chatty(cluster, client, workflow_file):
    client.register_file(workflow_file(CHATTY))
    return cluster, client


@pytest.mark.integration
def test_a_bursts_batches_are_numbered_from_one_and_every_line_is_stored_in_order(chatty):
    cluster, client = chatty
    cluster.start_worker("w")
    execution = client.wait(client.run("bursting", 2500)["id"], 60)
    assert execution["state"] == "COMPLETED", execution
    lines, truncated = stored(client, execution["id"])
    printed = [entry["message"] for entry in lines if entry["stream"] == "stdout"]
    assert printed == [f"line {i}" for i in range(2500)] and not truncated
    assert {entry["attempt"] for entry in lines} == {1}


@pytest.mark.integration
def test_a_trickle_is_stored_while_the_execution_runs_without_waiting_for_its_end(chatty, tmp_path):
    cluster, client = chatty
    cluster.start_worker("w")
    gate = tmp_path / "gate"
    execution_id = client.run("trickling", str(gate))["id"]
    eventually(
        lambda: [entry["message"] for entry in stored(client, execution_id)[0]][-2:] == ["one", "two"],
        30,
        "the two lines never reached the server while the task waited",
    )
    assert client.execution(execution_id)["state"] == "RUNNING"  # no closing checkpoint flushed them
    gate.touch()
    assert client.wait(execution_id, 30)["state"] == "COMPLETED"


@pytest.mark.integration
def test_lines_past_max_log_bytes_are_dropped_after_one_note(chatty):
    cluster, client = chatty
    cluster.start_worker("w", extra_args=("--max-log-bytes", "100"))
    execution = client.wait(client.run("overflowing")["id"], 60)
    assert execution["state"] == "COMPLETED", execution
    lines, truncated = stored(client, execution["id"])
    kept = [entry["message"] for entry in lines if entry["stream"] != "flux"]
    assert truncated and len(kept) < 10 and sum(len(message) for message in kept) <= 100
    assert [entry["stream"] for entry in lines].count("flux") == 1 and lines[-1]["stream"] == "flux"
    assert lines[-1]["message"] == "log truncated: this attempt passed 100 B (max_log_bytes); later lines were dropped"
    assert "later" not in kept
    assert "10 MiB" in logs_module.truncation_note(10 * 1024**2)["message"]


def test_a_batch_holds_at_most_a_thousand_lines_against_a_fake_server():
    """The fake records each batch's size: a real server takes up to 5,000 lines a batch."""

    async def scenario() -> FakeServer:
        server = FakeServer()
        shipper = LogShipper(server.call, "e1", 2)
        await shipper.put([line(str(i)) for i in range(2500)])
        await shipper.close()
        return server

    batches = asyncio.run(scenario()).batches()
    assert [(b["attempt"], b["batch"], len(b["lines"]), b["truncated"]) for b in batches] == [
        (2, 1, 1000, False),
        (2, 2, 1000, False),
        (2, 3, 500, False),
    ]
    assert [entry["message"] for b in batches for entry in b["lines"]] == [str(i) for i in range(2500)]


def test_a_full_buffer_holds_the_reader_until_the_server_takes_lines_against_a_fake_server():
    """A server that has not answered yet: only a fake can hold its answer back."""

    async def scenario() -> None:
        server = FakeServer()
        server.gate.clear()  # the server does not answer yet
        shipper = LogShipper(server.call, "e1", 1, buffer_lines=10, batch_lines=5)
        reader = asyncio.create_task(shipper.put([line(str(i)) for i in range(25)]))
        await until(lambda: server.held and len(shipper.pending) == 10)  # a batch out, the buffer full again
        assert not reader.done() and len(shipper.pending) == 10  # never more than the buffer
        server.gate.set()
        await asyncio.wait_for(reader, 5)
        await shipper.close()
        assert [entry["message"] for b in server.batches() for entry in b["lines"]] == [str(i) for i in range(25)]
        assert all(len(b["lines"]) <= 5 for b in server.batches())

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "answer",
    [
        refusal(409, {"detail": "not your attempt"}),
        refusal(404, {"detail": "Not Found"}),
        refusal(405, {"detail": "Method Not Allowed"}),
        refusal(422, {"detail": "bad"}),
        RuntimeError("bug"),
    ],
)
def test_a_refused_batch_stops_the_attempts_logs_without_raising_against_a_fake_server(answer, monkeypatch):
    """Each refusal given to the first batch of a live attempt, which this server never
    refuses: an older server's 404/405, a fenced attempt's 409, a malformed batch's 422, a bug."""
    monkeypatch.setattr(logs_module, "_warned_no_route", False)

    async def scenario() -> tuple[LogShipper, FakeServer]:
        server = FakeServer(logs_answer=answer)
        shipper = LogShipper(server.call, "e1", 1)
        await shipper.put([line("a")])
        await shipper.flush()
        await shipper.put([line("b")])  # dropped: no wait, no error
        await shipper.close()
        return shipper, server

    shipper, server = asyncio.run(scenario())
    assert shipper.stopped and len(server.batches()) == 1 and not shipper.pending


def test_no_route_is_warned_about_once_per_worker_against_a_fake_server(monkeypatch, caplog):
    """An older server without the logs route: this version always has it."""
    monkeypatch.setattr(logs_module, "_warned_no_route", False)

    async def scenario() -> None:
        for execution in ("e1", "e2"):
            shipper = LogShipper(FakeServer(logs_answer=refusal(404, {"detail": "Not Found"})).call, execution, 1)
            await shipper.put([line("a")])
            await shipper.close()

    with caplog.at_level(logging.WARNING, logger="flux.worker"):
        asyncio.run(scenario())
    assert len([r for r in caplog.records if "does not take logs" in r.getMessage()]) == 1


class ScriptedRunner(Runner):
    """Prints, then ends its attempt with ``closing`` (or waits to be killed)."""

    name = "scripted"

    def __init__(self, closing: EventType | None = EventType.WORKFLOW_COMPLETED):
        self.closing = closing
        #: Its lines are out of its hands and it waits to be stopped.
        self.waiting = False

    async def run(self, job, emit, stop: Stop, log=None, ask=None) -> None:  # noqa: ANN001
        emit(make_event(EventType.WORKFLOW_STARTED, job.workflow_name))
        await log([line(f"line {i}") for i in range(1500)])
        if self.closing is None:
            self.waiting = True
            await stop.kill.wait()
            await log([line("killed")])
            return
        emit(make_event(self.closing, job.workflow_name, value="done"))


def run_one(server: FakeServer, runner: Runner, hand_back: bool = False) -> None:
    async def scenario() -> None:
        executions = Executions(runner, server.call, log_buffer_lines=100)
        executions.start(
            Job(
                id="e1",
                workflow_name="w",
                workflow_version=1,
                source="",
                filename="w.py",
                input=None,
                attempt=3,
                completed_tasks={},
            )
        )
        if hand_back:
            await until(lambda: runner.waiting)
            executions.hand_back("worker w1 drained past its deadline")
        assert await executions.wait_empty(10, asyncio.Event())

    asyncio.run(scenario())


def test_every_line_is_on_the_server_before_the_closing_checkpoint_against_a_fake_server():
    """The order of requests: a real server keeps lines that come after it too."""
    server = FakeServer(delay=0.001)  # each request takes a while, as over a network
    run_one(server, ScriptedRunner())
    paths = server.paths()
    last_checkpoint = max(i for i, path in enumerate(paths) if path == "checkpoint")
    assert all(path == "checkpoint" for path in paths[last_checkpoint:])
    assert sum(len(b["lines"]) for b in server.batches()) == 1500
    assert {b["attempt"] for b in server.batches()} == {3}


def test_a_handed_back_attempt_ships_its_lines_before_it_ends_against_a_fake_server():
    """The order of requests, as above: the last one is the checkpoint that ends the attempt."""
    server = FakeServer()
    run_one(server, ScriptedRunner(closing=None), hand_back=True)
    assert server.paths()[-1] == "checkpoint"
    assert server.requests[-1][1]["events"][-1]["type"] == "ATTEMPT_ENDED"
    assert [entry["message"] for b in server.batches() for entry in b["lines"]][-1] == "killed"


def test_a_server_without_the_logs_route_still_completes_the_execution_against_a_fake_server(monkeypatch):
    """An older server without the logs route: this version always has it."""
    monkeypatch.setattr(logs_module, "_warned_no_route", False)
    server = FakeServer(logs_answer=refusal(404, {"detail": "Not Found"}))
    run_one(server, ScriptedRunner())
    checkpoints = [body for path, body in server.requests if path.endswith("/checkpoint")]
    assert checkpoints[-1]["events"][-1]["type"] == "WORKFLOW_COMPLETED"
    assert len(server.batches()) == 1  # one refusal, then no more tries
