"""A gang's local run (``train.run(input)`` without a server; docs/gangs.md#local-runs):
its ``size`` members as processes of this machine, each with what a worker gives a member
(``ctx.gang``, and MASTER_ADDR 127.0.0.1, MASTER_PORT a free port, RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE in its environment), so the code a fleet runs is debugged on
a laptop, torch.distributed's ``env://`` included.

Members are started with multiprocessing's ``spawn`` (a fresh interpreter: no copy of
this process's threads or event loop), which imports the workflow again by its module
and name: a gang runs locally only from a module's top level (a script's
``if __name__ == "__main__":``, as multiprocessing asks). As on a server, the members
share one fate: the first member that does not complete ends the others, and the run
ends as that member did; otherwise its output is rank 0's.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
import pickle
import queue
import socket
import sys
from typing import Any, Mapping

from flux.domain.events import ExecutionState
from flux.domain.gang import Gang, GangContext, GangMember

#: What a local member's worker is called in ``ctx.gang.members``.
LOCAL_WORKER = "local"
#: Seconds a member has to stop once another member ended the gang, before it is killed.
STOP_GRACE = 5.0
#: Seconds between looks at the members while none has reported.
POLL = 0.2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seats(size: int) -> list[GangContext]:
    """Every member's ``ctx.gang`` on this machine: one host, so the local rank is the rank;
    each member has a port of its own (a worker reserves one per member), rank 0's is the master's."""
    ports = [free_port() for _ in range(size)]
    members = tuple(GangMember(rank, LOCAL_WORKER, f"127.0.0.1:{port}") for rank, port in enumerate(ports))
    return [GangContext(rank, size, rank, size, "127.0.0.1", ports[0], members) for rank in range(size)]


def locate(workflow: Any) -> tuple[str, str]:
    """The module and name a member process imports ``workflow`` by; ``RuntimeError`` when
    it cannot be found there (defined in a function, or made at run time)."""
    module, name = getattr(workflow, "__module__", None), getattr(workflow, "__qualname__", "")
    if module is None or "<locals>" in name or _find(module, name, here=True) is not workflow:
        raise RuntimeError(
            f"workflow {workflow.name!r} is a gang: a local run starts its members as processes that import it, "
            f"so define it at the top level of a module (it is {module}.{name})"
        )
    return module, name


def _find(module: str, name: str, here: bool = False) -> Any:
    if module == "__main__" and not here:
        module = "__mp_main__"  # spawn runs the parent's script under this name
    target: Any = sys.modules.get(module) or importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part, None)
    return target


def run_gang(
    workflow: Any, input: Any, gang: Gang, secrets: Mapping[str, str] | None
) -> tuple[ExecutionState, Any, list]:
    """Run ``gang.size`` members of ``workflow`` on ``input`` and wait for them: the state,
    output and events of the run (rank 0's, or those of the first member that did not complete)."""
    where = locate(workflow)
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    members = [
        spawn.Process(
            target=_member, args=(where, input, dict(secrets or {}), seat, results), name=f"{workflow.name}-{seat.rank}"
        )
        for seat in seats(gang.size)
    ]
    for process in members:
        process.start()
    try:
        return _outcome(members, results)
    finally:
        _stop(members)
        results.close()


def _outcome(members: list, results: Any) -> tuple[ExecutionState, Any, list]:
    ended: dict[int, tuple[ExecutionState, Any, list]] = {}
    while len(ended) < len(members):
        try:
            rank, state, output, events = results.get(timeout=POLL)
        except queue.Empty:
            lost = [rank for rank, p in enumerate(members) if rank not in ended and p.exitcode is not None]
            if lost and results.empty():
                code = members[lost[0]].exitcode
                error = f"gang member rank {lost[0]} exited with code {code} before it ended"
                return ExecutionState.FAILED, {"error": error, "rank": lost[0]}, []
            continue
        state = ExecutionState(state)
        if state is ExecutionState.PAUSED:
            state, output = ExecutionState.FAILED, {"error": f"gang member rank {rank} paused: a local gang cannot"}
        ended[rank] = (state, output, events)
        if state is not ExecutionState.COMPLETED:
            return ended[rank]  # one fate: the others are ended by the caller
    return ended[0]


def _stop(members: list) -> None:
    for process in members:
        if process.is_alive():
            process.terminate()
    for process in members:
        process.join(STOP_GRACE)
        if process.is_alive():
            process.kill()
            process.join()


def _member(where: tuple[str, str], input: Any, secrets: dict, seat: GangContext, results: Any) -> None:
    """One member's process: its environment, its run (``ctx.gang`` its seat), its end told back."""
    os.environ.update(seat.env())
    workflow = _find(*where)
    run = asyncio.run(workflow.run_async(input, secrets, member=seat))
    told = (seat.rank, run.state.value, run.output, list(run.events))
    try:
        pickle.dumps(told)
    except Exception:  # noqa: BLE001 - an output this process cannot hand back is shown as text
        told = (seat.rank, run.state.value, repr(run.output), [])
    results.put(told)


def chosen_gang(declared: Gang | None, given: Gang | Mapping[str, Any] | None) -> Gang | None:
    """The gang a local run runs as: ``given`` (a ``Gang``, or fields changing the declared
    one, ``{"size": 8}`` resizing it), else the workflow's; None for a single execution."""
    if given is None or isinstance(given, Gang):
        return given if given is not None else declared
    if declared is None:
        return Gang.from_dict(given)
    if set(given) == {"size"}:
        return declared.with_size(given["size"])
    return Gang.from_dict({**declared.to_dict(), **given})
