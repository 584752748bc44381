"""A gang member on its worker, the pieces that need no server (issue 53): the address it
advertises, the port it reserves, the context its job builds from the rendezvous, and a
real child process that gets the six variables and ``ctx.gang`` before user code runs.
The rendezvous itself, against a real server: ``tests/e2e/test_gang_worker_e2e.py``."""

from __future__ import annotations

import asyncio
import errno
import json
import socket

import pytest

from flux.domain.gang import GangContext, GangMember
from flux.protocol.gangs import GangPeer, GangSeat, RendezvousReply
from flux.worker.gangs import advertise_address, reserved_port
from flux.worker.runners.base import Job, Stop
from flux.worker.runners.subprocess import SubprocessRunner

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
