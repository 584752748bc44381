"""The worker's checkpoints share a few request slots (``CHECKPOINTS_IN_FLIGHT``), against
a fake server that records what it is sent: a burst's events leave in few, larger,
numbered batches, in order and complete; one execution alone is not held back."""

from __future__ import annotations

import asyncio

from flux.domain.events import EventType
from flux.model.runtime import make_event
from flux.worker.runners.base import Job, Runner, Stop
from flux.worker.running import CHECKPOINTS_IN_FLIGHT, Executions

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


class FakeServer:
    """``Worker.call``'s shape: answers each checkpoint after ``delay`` seconds, counting
    the requests in flight at once."""

    def __init__(self, delay: float):
        self.delay = delay
        self.bodies: dict[str, list[dict]] = {}
        self.in_flight = self.most_in_flight = 0

    async def call(self, path: str, body: dict, timeout: float | None = None, reply: type | None = None):  # noqa: ANN201
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        self.bodies.setdefault(path.split("/")[2], []).append(body)
        answer = {"state": "RUNNING", "cancel": False}
        return answer if reply is None else reply.model_validate(answer)


def run(executions: int, delay: float) -> FakeServer:
    server = FakeServer(delay)

    async def scenario() -> None:
        running = Executions(Chain(), server.call, capture_output=False)
        for n in range(executions):
            running.start(Job(id=f"e{n}", workflow_name="w", workflow_version=1, source="", filename="w.py", input=None,
                              attempt=1, completed_tasks={}))
        assert await running.wait_empty(30, asyncio.Event())

    asyncio.run(scenario())
    return server


def test_a_burst_shares_the_request_slots_and_each_execution_arrives_whole_in_order():
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


def test_one_execution_alone_sends_its_first_event_at_once():
    server = run(executions=1, delay=0.005)
    (bodies,) = server.bodies.values()
    assert [event["type"] for event in bodies[0]["events"]] == ["WORKFLOW_STARTED"]
