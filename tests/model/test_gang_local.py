"""A gang's local run (issue 53 item 7, docs/gangs.md#local-runs): ``train.run(input)``
without a server runs its members as processes of this machine, each with ``ctx.gang``
and the environment torch.distributed's ``env://`` reads, and they reach each other at
MASTER_ADDR:MASTER_PORT (a small all-reduce over TCP here). The run's output is rank 0's;
a member that fails ends the gang."""

from __future__ import annotations

import os
import socket

import pytest

from flux import Gang, call, workflow
from flux.domain.events import ExecutionState
from flux.model.gang_local import chosen_gang, seats

ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def _all_reduce(value: int) -> int:
    """Sum ``value`` over every member through rank 0's socket at MASTER_ADDR:MASTER_PORT."""
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    if rank == 0:
        with socket.create_server(address) as server:
            peers = [server.accept()[0] for _ in range(size - 1)]
            total = value + sum(int(peer.makefile().readline()) for peer in peers)
            for peer in peers:
                peer.sendall(f"{total}\n".encode())
                peer.close()
            return total
    for _ in range(200):  # rank 0 may not listen yet
        try:
            with socket.create_connection(address, timeout=10) as peer:
                peer.sendall(f"{value}\n".encode())
                return int(peer.makefile().readline())
        except ConnectionRefusedError:
            import time

            time.sleep(0.05)
    raise RuntimeError("rank 0 never listened")


@workflow.with_options(gang=Gang(size=3, topology="rack"))
async def reduce_gang(ctx):
    gang = ctx.gang
    env = {name: os.environ[name] for name in ENV}
    assert env == gang.env(), (env, gang.env())
    total = _all_reduce(10**gang.rank)
    return {"rank": gang.rank, "total": total, "env": env, "members": [m.address for m in gang.members]}


@workflow.with_options(gang=Gang(size=2, topology="rack"))
async def failing_gang(ctx):
    if ctx.gang.rank == 1:
        raise ValueError("rank 1 gives up")
    import asyncio

    await asyncio.sleep(60)  # ended by its peer's failure, long before this
    return "never"


@workflow
async def calls_a_gang(ctx):
    return await call(reduce_gang, None, gang={"size": 2})


def test_a_gang_step_in_a_local_run_starts_its_child_as_a_gang():
    run = calls_a_gang.run(None)
    assert run.state is ExecutionState.COMPLETED, run.output
    assert run.output["total"] == 11 and run.output["env"]["WORLD_SIZE"] == "2"


def test_a_local_gang_runs_its_members_as_processes_that_reach_each_other():
    run = reduce_gang.run(None)
    assert run.state is ExecutionState.COMPLETED, run.output
    output = run.output
    assert output["rank"] == 0 and output["total"] == 111  # 1 + 10 + 100: every member's value
    env = output["env"]
    assert env["MASTER_ADDR"] == "127.0.0.1" and env["RANK"] == "0" and env["WORLD_SIZE"] == "3"
    assert env["LOCAL_RANK"] == "0" and env["LOCAL_WORLD_SIZE"] == "3"
    assert output["members"][0] == f"127.0.0.1:{env['MASTER_PORT']}" and len(set(output["members"])) == 3


def test_a_run_may_resize_the_gang():
    run = reduce_gang.run(None, gang={"size": 2})
    assert run.state is ExecutionState.COMPLETED, run.output
    assert run.output["total"] == 11 and run.output["env"]["WORLD_SIZE"] == "2"


def test_a_member_that_fails_ends_the_gang():
    run = failing_gang.run(None)
    assert run.state is ExecutionState.FAILED
    assert "rank 1 gives up" in str(run.output)


def test_a_gang_defined_in_a_function_cannot_run_locally():
    @workflow.with_options(gang=Gang(size=2, topology="rack"))
    async def nested(ctx):
        return None

    with pytest.raises(RuntimeError, match="define it at the top level of a module"):
        nested.run(None)


def test_the_seats_and_the_gang_a_local_run_chooses():
    first, second = seats(2)
    assert (first.rank, second.rank, first.master_port) == (0, 1, second.master_port)
    assert first.members == second.members and first.members[0].address == f"127.0.0.1:{first.master_port}"
    declared = Gang(size=4, topology="rack", per_worker=4)
    assert chosen_gang(declared, {"size": 2}) == Gang(size=2, topology="rack", per_worker=2)
    assert chosen_gang(None, None) is None and chosen_gang(declared, None) is declared
    assert chosen_gang(None, {"size": 2, "topology": "zone"}).topology == "zone"
