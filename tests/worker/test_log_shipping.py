"""The worker ships each attempt's log lines (docs/logs.md, "Shipping"), against a fake
server: batching, numbering, the byte cap, back-pressure, refusals that only stop the
logs, and lines always on the server before the checkpoint that closes the attempt."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

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


class FakeServer:
    """``Worker.call``'s shape; records every request, answers checkpoints, and answers
    log batches with ``logs_answer`` (an exception to raise, or None to accept)."""

    def __init__(self, logs_answer: Exception | None = None, delay: float = 0.0):
        self.requests: list[tuple[str, dict]] = []
        self.logs_answer, self.delay = logs_answer, delay
        self.gate = asyncio.Event()
        self.gate.set()

    async def call(self, path: str, body: dict, timeout: float | None = None, reply: type | None = None):  # noqa: ANN201
        await self.gate.wait()
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


def test_batches_are_numbered_from_one_and_hold_at_most_a_thousand_lines():
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


def test_a_trickle_leaves_within_the_interval_without_a_flush():
    async def scenario() -> list[dict]:
        server = FakeServer()
        shipper = LogShipper(server.call, "e1", 1, interval=0.05)
        await shipper.put([line("one"), line("two")])
        await asyncio.sleep(0.3)
        sent = server.batches()
        shipper.stop()
        return sent

    assert [[entry["message"] for entry in b["lines"]] for b in asyncio.run(scenario())] == [["one", "two"]]


def test_lines_past_max_bytes_are_dropped_after_one_note():
    async def scenario() -> tuple[LogShipper, FakeServer]:
        server = FakeServer()
        shipper = LogShipper(server.call, "e1", 1, max_bytes=100)
        await shipper.put([line("x" * 30) for _ in range(10)])
        await shipper.put([line("later")])
        await shipper.close()
        return shipper, server

    shipper, server = asyncio.run(scenario())
    (batch,) = server.batches()
    assert [entry["stream"] for entry in batch["lines"]] == ["stdout"] * 3 + ["flux"]
    assert (
        batch["lines"][-1]["message"]
        == "log truncated: this attempt passed 100 B (max_log_bytes); later lines were dropped"
    )
    assert batch["truncated"] is True and shipper.bytes == 90
    assert "10 MiB" in logs_module.truncation_note(10 * 1024**2)["message"]


def test_a_full_buffer_holds_the_reader_until_the_server_takes_lines():
    async def scenario() -> None:
        server = FakeServer()
        server.gate.clear()  # the server does not answer yet
        shipper = LogShipper(server.call, "e1", 1, buffer_lines=10, batch_lines=5)
        reader = asyncio.create_task(shipper.put([line(str(i)) for i in range(25)]))
        await asyncio.sleep(0.1)
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
def test_a_refused_batch_stops_the_attempts_logs_without_raising(answer, monkeypatch):
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


def test_no_route_is_warned_about_once_per_worker(monkeypatch, caplog):
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

    async def run(self, job, emit, stop: Stop, log=None, ask=None) -> None:  # noqa: ANN001
        emit(make_event(EventType.WORKFLOW_STARTED, job.workflow_name))
        await log([line(f"line {i}") for i in range(1500)])
        if self.closing is None:
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
            await asyncio.sleep(0.1)
            executions.hand_back("worker w1 drained past its deadline")
        assert await executions.wait_empty(10, asyncio.Event())

    asyncio.run(scenario())


def test_every_line_is_on_the_server_before_the_closing_checkpoint():
    server = FakeServer(delay=0.001)
    run_one(server, ScriptedRunner())
    paths = server.paths()
    last_checkpoint = max(i for i, path in enumerate(paths) if path == "checkpoint")
    assert all(path == "checkpoint" for path in paths[last_checkpoint:])
    assert sum(len(b["lines"]) for b in server.batches()) == 1500
    assert {b["attempt"] for b in server.batches()} == {3}


def test_a_handed_back_attempt_ships_its_lines_before_it_ends():
    server = FakeServer()
    run_one(server, ScriptedRunner(closing=None), hand_back=True)
    assert server.paths()[-1] == "checkpoint"
    assert server.requests[-1][1]["events"][-1]["type"] == "ATTEMPT_ENDED"
    assert [entry["message"] for b in server.batches() for entry in b["lines"]][-1] == "killed"


def test_a_server_without_the_logs_route_still_completes_the_execution(monkeypatch):
    monkeypatch.setattr(logs_module, "_warned_no_route", False)
    server = FakeServer(logs_answer=refusal(404, {"detail": "Not Found"}))
    run_one(server, ScriptedRunner())
    checkpoints = [body for path, body in server.requests if path.endswith("/checkpoint")]
    assert checkpoints[-1]["events"][-1]["type"] == "WORKFLOW_COMPLETED"
    assert len(server.batches()) == 1  # one refusal, then no more tries
