"""What every runner shares: the job it is given and the runner interface.

The worker imports this and never the programming model: it runs no workflow code
(``flux.worker.runners.execute`` does, in a child or, with the inprocess runner, here).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from pydantic import ConfigDict

from flux.domain.gang import GangContext, GangMember
from flux.protocol.claims import ClaimedExecution, PreemptionNotice
from flux.protocol.gangs import RendezvousReply
from flux.worker.runners.ceilings import Ceilings
from flux.worker.runners.protocol import LogSink

if TYPE_CHECKING:
    from flux.model.runtime import Ask


class Job(ClaimedExecution):
    """One attempt to run: the claimed execution as the worker decoded it from its claim
    (``flux.protocol.ClaimedExecution``), plus what the worker adds before it runs it.

    Immutable: the worker adds its fields with ``model_copy(update=...)``. A subprocess
    child gets it as one JSON line and decodes it back (``flux.worker.runners.child``)."""

    model_config = ConfigDict(frozen=True)

    #: The unpacked bundle the workflow is imported from (the worker's bundle cache).
    bundle_root: str | None = None
    #: The ceilings the runner planned from the allotment: the child applies them to itself.
    limits: Ceilings | None = None
    #: What the child writes to its fds 1 and 2 when its attempt closes (``flux.worker.runners.pipes``).
    output_mark: str | None = None
    #: A gang member's rendezvous once every member arrived (``flux.worker.gangs``): its peers, rank 0's address.
    rendezvous: RendezvousReply | None = None

    @classmethod
    def claimed(cls, execution: ClaimedExecution) -> Job:
        """The job of a claimed execution (already validated: not validated again)."""
        fields = {name: getattr(execution, name) for name in type(execution).model_fields}
        return cls.model_construct(execution.model_fields_set, **fields)

    def gang_context(self) -> GangContext | None:
        """What a gang member's workflow sees as ``ctx.gang`` (and its process's environment,
        ``GangContext.env``): its seat, and its peers from the rendezvous; None until every
        member arrived, and for an execution that is not a member."""
        seat, met = self.gang, self.rendezvous
        if seat is None or met is None:
            return None
        members = tuple(
            GangMember(peer.rank, peer.worker, peer.address) for peer in sorted(met.members, key=lambda peer: peer.rank)
        )
        master_addr, master_port = met.master_addr, met.master_port
        if (master_addr is None or master_port is None) and members and members[0].address:
            host, _, port = members[0].address.rpartition(":")  # rank 0's "host:port"
            master_addr, master_port = host.strip("[]"), int(port)
        if master_addr is None or master_port is None:
            raise ValueError(f"execution {self.id}: the rendezvous named no address for rank 0")
        return GangContext(
            rank=seat.rank,
            size=seat.size,
            local_rank=seat.local_rank,
            local_size=seat.local_size,
            master_addr=master_addr,
            master_port=master_port,
            members=members,
        )


@dataclass
class Stop:
    """How a worker stops a running attempt (``cancel``, ``kill``), and the preemption
    notice that may come before a kill (``preempt``).

    ``cancel``: a user cancelled the execution; the workflow records
    WORKFLOW_CANCELLED (a child gets SIGTERM, then SIGKILL after a grace period).
    ``kill``: the attempt is no longer this worker's (fenced) or is being handed back
    (a drain's deadline passed, a preemption's grace period ended); it is killed at
    once and records nothing more. ``preempt``: not a stop, set whenever ``notice``
    changes (a preemption notice the workflow sees, or None once it is withdrawn;
    docs/contention.md): the runner clears it and tells the workflow. The kill follows
    at the notice's end unless it is withdrawn first.
    """

    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    kill: asyncio.Event = field(default_factory=asyncio.Event)
    preempt: asyncio.Event = field(default_factory=asyncio.Event)
    notice: PreemptionNotice | None = None


class Runner(ABC):
    name: str

    @abstractmethod
    async def run(
        self, job: Job, emit: Callable[[dict], None], stop: Stop, log: LogSink | None = None, ask: Ask | None = None
    ) -> None:
        """Run one attempt. ``emit`` takes its events; ``log``, when given, the log lines
        the runner captured (docs/logs.md), in batches: a runner awaits it before it
        reads more of the attempt's output (back-pressure), and hands it every line
        written before the event that closes the attempt before that event. ``ask``:
        the worker's services to the attempt (cache lookups, secrets: ``flux.worker.services``)."""

    async def start(self) -> None:
        """Prepare (e.g. warm a process pool). Called once before the first job."""

    async def close(self) -> None:
        """Release what ``start`` prepared."""
