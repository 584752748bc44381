"""The worker's checkpoints share a few request slots (``CHECKPOINTS_IN_FLIGHT``): a
burst's events leave in few, larger, numbered batches, in order and complete; an
attempt's first checkpoint lingers (``OPENING_LINGER``) for its closing event, and no
longer.

That each execution's events arrive whole and in order is seen through a real server
and worker (the event log). How many requests carry them, how many are in flight at
once and what each holds only the wire shows (the server counts no requests): those
tests run the worker's ``Executions`` against a fake server that records what it is
sent, and say so in their names."""

from __future__ import annotations

import asyncio

import pytest

from flux.domain.events import EventType
from flux.model.runtime import make_event
from flux.worker.runners.base import Job, Runner, Stop
from flux.worker.running import CHECKPOINTS_IN_FLIGHT, OPENING_LINGER, Executions

TASKS = 20


class Chain(Runner):
    """What a chain of ``TASKS`` quick tasks emits, yielding to the loop between events."""

    name = "chain"

    async def run(self, job, emit, stop: Stop, log=None, ask=None) -> None:  # noqa: ANN001
        emit(make_event(EventType.WORKFLOW_STARTED, job.workflow_name))
        for i in range(TASKS):
            for kind in (EventType.TASK_STARTED, EventType.TASK_COMPLETED):
                await asyncio.sleep(0)
                emit(make_event(kind, "tick", f"tick:{i + 1}", i))
        emit(make_event(EventType.WORKFLOW_COMPLETED, job.workflow_name, value=TASKS))


class Gated(Runner):
    """Starts, then works until ``gate`` opens, then completes."""

    name = "gated"

    def __init__(self):
        self.gate = asyncio.Event()

    async def run(self, job, emit, stop: Stop, log=None, ask=None) -> None:  # noqa: ANN001
        emit(make_event(EventType.WORKFLOW_STARTED, job.workflow_name))
        await self.gate.wait()
        emit(make_event(EventType.WORKFLOW_COMPLETED, job.workflow_name, value=1))


class FakeServer:
    """``Worker.call``'s shape: answers each checkpoint after ``delay`` seconds, counting
    the requests in flight at once."""

    def __init__(self, delay: float):
        self.delay = delay
        self.bodies: dict[str, list[dict]] = {}
        self.in_flight = self.most_in_flight = 0
        self.arrived: list[float] = []

    async def call(self, path: str, body: dict, timeout: float | None = None, reply: type | None = None):  # noqa: ANN201
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        self.bodies.setdefault(path.split("/")[2], []).append(body)
        self.arrived.append(asyncio.get_running_loop().time())
        answer = {"state": "RUNNING", "cancel": False}
        return answer if reply is None else reply.model_validate(answer)


def run(executions: int, delay: float, runner: Runner | None = None, meanwhile=None) -> FakeServer:  # noqa: ANN001
    """``executions`` of ``runner`` against a fake server; ``meanwhile(server)``: a coroutine run alongside."""
    server = FakeServer(delay)

    async def scenario() -> None:
        server.began = asyncio.get_running_loop().time()
        running = Executions(runner or Chain(), server.call, capture_output=False)
        for n in range(executions):
            running.start(
                Job(
                    id=f"e{n}",
                    workflow_name="w",
                    workflow_version=1,
                    source="",
                    filename="w.py",
                    input=None,
                    attempt=1,
                    completed_tasks={},
                )
            )
        if meanwhile is not None:
            await meanwhile(server)
        assert await running.wait_empty(30, asyncio.Event())

    asyncio.run(scenario())
    return server


CHAIN = """
from flux import task, workflow


@task
async def tick(n):
    return n


@workflow
async def chain(ctx):
    for i in range(20):
        await tick(i)
    return 20
"""


@pytest.mark.integration
def test_a_burst_of_executions_each_arrives_whole_and_in_order(cluster, client, workflow_file):
    client.register_file(workflow_file(CHAIN))
    cluster.start_worker("w", max_concurrent_executions=30, runner="inprocess")
    ids = [client.run("chain")["id"] for _ in range(30)]
    for execution_id in ids:
        assert client.wait(execution_id, 60)["state"] == "COMPLETED"
        logged = client.events(execution_id)
        assert [e["seq"] for e in logged] == list(range(1, len(logged) + 1))  # no event lost or repeated
        tasks = [(e["type"], e["task_id"]) for e in logged if e["type"].startswith("TASK_")]
        pairs = ["TASK_STARTED", "TASK_COMPLETED"] * TASKS
        assert tasks == [(kind, f"tick:{i // 2 + 1}") for i, kind in enumerate(pairs)]
        assert logged[-1]["type"] == "WORKFLOW_COMPLETED"


def test_a_burst_shares_the_request_slots_in_few_larger_batches_against_a_fake_server():
    server = run(executions=30, delay=0.005)
    assert server.most_in_flight <= CHECKPOINTS_IN_FLIGHT
    events = 2 + 2 * TASKS
    assert len(server.bodies) == 30
    for bodies in server.bodies.values():
        assert [body["batch"] for body in bodies] == list(range(1, len(bodies) + 1))
        sent = [event for body in bodies for event in body["events"]]
        assert len(sent) == events and sent[-1]["type"] == "WORKFLOW_COMPLETED"
        assert [event["task_id"] for event in sent[1:-1]] == [f"tick:{i // 2 + 1}" for i in range(2 * TASKS)]
    requests = sum(len(bodies) for bodies in server.bodies.values())
    assert requests <= 30 * events / 4  # events piled up while the slots were busy: they left together


def test_an_execution_that_ends_within_the_linger_sends_one_checkpoint_against_a_fake_server():
    server = run(executions=1, delay=0.005)
    (bodies,) = server.bodies.values()
    assert len(bodies) == 1 and bodies[0]["batch"] == 1
    assert [event["type"] for event in bodies[0]["events"]][::41] == ["WORKFLOW_STARTED", "WORKFLOW_COMPLETED"]


def test_a_longer_one_sends_its_opening_checkpoint_after_the_linger_not_at_its_end_against_a_fake_server():
    runner = Gated()

    async def open_the_gate_once_it_opened(server: FakeServer) -> None:
        while not server.bodies:  # the opening checkpoint arrives while the work still waits on its gate
            await asyncio.sleep(0.005)
        runner.gate.set()

    server = run(executions=1, delay=0.001, runner=runner, meanwhile=open_the_gate_once_it_opened)
    (bodies,) = server.bodies.values()
    assert [[event["type"] for event in body["events"]] for body in bodies] == [
        ["WORKFLOW_STARTED"],
        ["WORKFLOW_COMPLETED"],
    ]
    assert server.arrived[0] - server.began >= OPENING_LINGER  # it lingered for a closing event first
