"""A gang member on its worker, the pieces that need no server (issue 53): the address it
advertises, the port it reserves, the context its job builds from the rendezvous, and a
real child process that gets the six variables and ``ctx.gang`` before user code runs,
and each way out of the rendezvous (``_against_a_fake_server``). The rendezvous against a
real server: ``tests/e2e/test_gang_worker_e2e.py``."""

from __future__ import annotations

import asyncio
import errno
import json
import socket

import httpx
import pytest

from flux.domain.events import EventType, make_event
from flux.domain.gang import GangContext, GangMember
from flux.protocol.claims import PreemptionNotice
from flux.protocol.gangs import GangPeer, GangSeat, RendezvousReply
from flux.worker import gangs
from flux.worker.gangs import advertise_address, reserved_port
from flux.worker.runners.base import Job, Runner, Stop
from flux.worker.runners.subprocess import SubprocessRunner
from flux.worker.running import Executions

MEMBER = """
import os
from flux import workflow

@workflow
async def member(ctx):
    names = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    gang = ctx.gang
    return {
        "env": {name: os.environ.get(name) for name in names},
        "gang": None if gang is None else [gang.rank, gang.size, gang.master_addr, gang.master_port,
                                           [[m.rank, m.worker, m.address] for m in gang.members]],
    }
"""

SEAT = GangSeat(gang_id="g", rank=1, size=3, local_rank=1, local_size=2, start_timeout=60)
MET = RendezvousReply(
    ready=True,
    members=[
        GangPeer(rank=2, worker="w2", address="10.0.0.2:7002"),
        GangPeer(rank=0, worker="w1", address="10.0.0.1:7000"),
        GangPeer(rank=1, worker="w1", address="10.0.0.1:7001"),
    ],
    master_addr="10.0.0.1",
    master_port=7000,
)


def job(**fields) -> Job:  # noqa: ANN003
    base = dict(
        id="m1", workflow_name="member", workflow_version=1, source=MEMBER, filename="member.py", input=None,
        attempt=1, completed_tasks={},
    )  # fmt: skip
    return Job(**{**base, **fields})


def test_the_advertised_address_is_the_hosts_toward_the_server():
    assert advertise_address("http://127.0.0.1:8000") == "127.0.0.1"
    assert advertise_address("http://127.0.0.1:8000,http://10.9.9.9:8000") == "127.0.0.1"  # the first replica
    assert advertise_address("https://localhost") in ("127.0.0.1", "::1")


def test_the_reserved_port_is_held_until_released():
    with reserved_port("127.0.0.1") as port:
        other = socket.socket()
        with pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))
        other.close()
        assert taken.value.errno == errno.EADDRINUSE
    with socket.socket() as again:  # free at once: what torch binds as MASTER_PORT
        again.bind(("127.0.0.1", port))
        again.listen()


def test_an_address_not_of_this_host_reserves_on_every_interface():
    with reserved_port("192.0.2.7") as port:  # TEST-NET-1: never a local address
        assert 0 < port < 65536


def test_the_context_is_the_seat_and_the_rendezvous_by_rank():
    assert job().gang_context() is None
    assert job(gang=SEAT).gang_context() is None  # not started yet: no peers
    gang = job(gang=SEAT, rendezvous=MET).gang_context()
    assert gang == GangContext(
        rank=1,
        size=3,
        local_rank=1,
        local_size=2,
        master_addr="10.0.0.1",
        master_port=7000,
        members=(
            GangMember(0, "w1", "10.0.0.1:7000"),
            GangMember(1, "w1", "10.0.0.1:7001"),
            GangMember(2, "w2", "10.0.0.2:7002"),
        ),
    )
    unnamed = MET.model_copy(update={"master_addr": None, "master_port": None})
    gang = job(gang=SEAT, rendezvous=unnamed).gang_context()
    assert (gang.master_addr, gang.master_port) == ("10.0.0.1", 7000)  # from rank 0's address


def test_the_job_travels_to_the_child_with_its_rendezvous():
    sent = job(gang=SEAT, rendezvous=MET)
    assert Job.model_validate(json.loads(sent.model_dump_json())).gang_context() == sent.gang_context()


async def run_in_child(*jobs: Job) -> list[list[dict]]:
    runner = SubprocessRunner(warm_processes=1, max_idle=1)
    await runner.start()
    results = []
    try:
        for one in jobs:
            events: list[dict] = []
            await runner.run(one, events.append, Stop())
            results.append(events)
    finally:
        await runner.close()
    return results


def test_a_member_child_has_the_six_variables_and_ctx_gang_and_is_not_reused():
    """The same warm pool runs a member, then a plain execution: the member's variables
    never reach the next one (a member's child retires: env:// state, a process group)."""
    member, plain = asyncio.run(run_in_child(job(gang=SEAT, rendezvous=MET), job(id="p1")))
    assert member[-1]["type"] == "WORKFLOW_COMPLETED", member[-1]
    assert member[-1]["value"] == {
        "env": {
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "7000",
            "RANK": "1",
            "WORLD_SIZE": "3",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
        },
        "gang": [
            1,
            3,
            "10.0.0.1",
            7000,
            [[0, "w1", "10.0.0.1:7000"], [1, "w1", "10.0.0.1:7001"], [2, "w2", "10.0.0.2:7002"]],
        ],
    }
    assert plain[-1]["type"] == "WORKFLOW_COMPLETED", plain[-1]
    assert plain[-1]["value"]["gang"] is None
    assert set(plain[-1]["value"]["env"].values()) == {None}


# The worker's side of the rendezvous, each way out of it. A real server ends a gang's
# attempt on its own clock (tests/e2e/test_gang_worker_e2e.py); these pin the worker's
# answer to each reply, including the ones a real server gives only in a race (a
# preemption or a cancel that lands while a member waits), against a fake server.


class Recording(Runner):
    """Records the job it is given and completes it at once."""

    name = "recording"

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    async def run(self, job, emit, stop: Stop, log=None, ask=None) -> None:  # noqa: ANN001
        self.jobs.append(job)
        emit(make_event(EventType.WORKFLOW_STARTED, job.workflow_name))
        emit(make_event(EventType.WORKFLOW_COMPLETED, job.workflow_name, value=1))


class FakeServer:
    """``Worker.call``'s shape: rendezvous posts get ``answers`` in turn (a reply, an HTTP
    status, or None: hold until cancelled); checkpoints are recorded."""

    def __init__(self, *answers) -> None:  # noqa: ANN002
        self.answers = list(answers)
        self.posts: list = []
        self.events: list[dict] = []

    async def call(self, path: str, body, timeout=None, reply=None):  # noqa: ANN001, ANN201
        if path.endswith("/rendezvous"):
            self.posts.append(body)
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            if answer is None:
                await asyncio.sleep(3600)
            if isinstance(answer, int):
                request = httpx.Request("POST", path)
                raise httpx.HTTPStatusError(
                    "refused", request=request, response=httpx.Response(answer, request=request)
                )
            return answer
        self.events.extend(body["events"])
        return reply.model_validate({"state": "RUNNING", "cancel": False})

    def types(self) -> list[str]:
        return [event["type"] for event in self.events]


WAITING = RendezvousReply(ready=False)


def member(timeout: float = 60) -> Job:
    return job(gang=SEAT.model_copy(update={"start_timeout": timeout}))


def gather(server: FakeServer, one: Job, meanwhile=None) -> Recording:  # noqa: ANN001
    runner = Recording()

    async def scenario() -> None:
        executions = Executions(runner, server.call, capture_output=False)
        executions.start(one)
        if meanwhile is not None:
            await asyncio.sleep(0.2)
            meanwhile(executions)
        assert await executions.wait_empty(10, asyncio.Event())

    asyncio.run(scenario())
    return runner


def test_a_member_posts_until_ready_then_runs_with_its_peers_against_a_fake_server():
    server = FakeServer(WAITING, WAITING, MET)
    runner = gather(server, member())
    assert [post.attempt for post in server.posts] == [1, 1, 1]
    assert {(post.address, post.port) for post in server.posts} == {("127.0.0.1", server.posts[0].port)}
    assert [one.rendezvous for one in runner.jobs] == [MET]
    assert server.types() == ["WORKFLOW_STARTED", "WORKFLOW_COMPLETED"]


def test_a_409_stops_the_member_reporting_nothing_against_a_fake_server():
    server = FakeServer(WAITING, 409)
    runner = gather(server, member())
    assert runner.jobs == [] and server.events == []


def test_a_member_past_start_timeout_ends_its_attempt_handed_back_against_a_fake_server(monkeypatch):
    monkeypatch.setattr(gangs, "BACKSTOP", 0.0)  # the server's own deadline would decide first
    server = FakeServer(WAITING)
    runner = gather(server, member(timeout=0.5))
    assert runner.jobs == []
    assert [(e["type"], e["value"]) for e in server.events] == [
        ("ATTEMPT_ENDED", {"end": "handed_back", "cause": "gang did not start within start_timeout"})
    ]


def test_a_member_preempted_at_the_rendezvous_ends_at_once_against_a_fake_server():
    server = FakeServer(None)
    notice = PreemptionNotice(execution_id="m1", attempt=1, by="g2", seconds=3600)
    runner = gather(server, member(), lambda executions: executions.preempt([notice]))
    assert runner.jobs == []  # no grace: it has nothing to save
    assert [(e["type"], e["value"]) for e in server.events] == [
        ("ATTEMPT_ENDED", {"end": "preempted", "cause": "preempted by g2"})
    ]


def test_a_member_cancelled_at_the_rendezvous_records_its_cancellation_against_a_fake_server():
    server = FakeServer(None)
    runner = gather(server, member(), lambda executions: executions.cancel(["m1"]))
    assert runner.jobs == []
    assert server.types() == ["WORKFLOW_CANCELLED"]


def test_the_inprocess_runner_gives_ctx_gang_but_leaves_the_shared_environment_alone():
    from flux.worker.runners.inprocess import InProcessRunner

    events: list[dict] = []
    asyncio.run(InProcessRunner().run(job(gang=SEAT, rendezvous=MET), events.append, Stop()))
    assert events[-1]["type"] == "WORKFLOW_COMPLETED", events[-1]
    assert events[-1]["value"]["gang"][:4] == [1, 3, "10.0.0.1", 7000]
    assert set(events[-1]["value"]["env"].values()) == {None}  # one process serves every execution
