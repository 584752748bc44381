"""A gang member's side of the protocol (docs/gangs.md): its seat in the claimed job,
and the rendezvous through the server that starts the members together.

A member's job carries its ``GangSeat`` (``ClaimedExecution.gang``). Before user code
runs, its worker reserves a port and posts a ``Rendezvous`` (``POST
/executions/{id}/rendezvous``) with the address its peers reach it at; the reply says
whether every member of the gang's attempt has arrived and, once they all have, who
they are (``GangPeer`` by rank) and rank 0's address and port: what torch.distributed's
``env://`` reads as ``MASTER_ADDR`` and ``MASTER_PORT``. A 409 means the gang's attempt
was ended meanwhile: the member must not start.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from flux.protocol.base import Strict


class GangSeat(BaseModel):
    """Where one member sits in its gang, fixed at placement."""

    gang_id: str = Field(description="The gang's execution (what the user started)")
    rank: int = Field(ge=0)
    size: int = Field(ge=2, description="WORLD_SIZE: the gang's members")
    local_rank: int = Field(ge=0, description="LOCAL_RANK: its index among the gang's members on its worker")
    local_size: int = Field(ge=1, description="LOCAL_WORLD_SIZE: the gang's members on its worker")
    start_timeout: float = Field(description="Seconds every member has, from the placement, to reach the rendezvous")


class Rendezvous(Strict):
    """A member has started on its worker and waits for its peers."""

    attempt: int = Field(description="The member's attempt (its fencing token)")
    address: str = Field(min_length=1, max_length=255, description="Host its peers reach it at (--advertise-address)")
    port: int = Field(ge=1, le=65535, description="A port its worker reserved for it")
    wait: float = Field(default=10.0, ge=0, le=30, description="Seconds to hold the reply while peers are missing")


class GangPeer(BaseModel):
    rank: int
    worker: str
    address: str | None = Field(default=None, description="host:port it gave at the rendezvous (None: not yet)")


class RendezvousReply(BaseModel):
    ready: bool = Field(description="Every member has arrived: start now (else post again)")
    members: list[GangPeer] = Field(default=[], description="Every member by rank (once ready)")
    master_addr: str | None = Field(default=None, description="Rank 0's host (MASTER_ADDR)")
    master_port: int | None = Field(default=None, description="Rank 0's reserved port (MASTER_PORT)")
