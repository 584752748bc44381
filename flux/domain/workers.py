"""A worker's states and allocation modes, and its liveness as a server knows it.

The values are the strings the database stores and the API shows: an enum keeps
the spelling in one place, a ``StrEnum`` keeps the wire unchanged."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class WorkerState(StrEnum):
    """ONLINE while it beats, STALE once it missed a few, OFFLINE once evicted or
    gone; a draining live worker shows DRAINING, then DRAINED once idle."""

    ONLINE = "ONLINE"
    STALE = "STALE"
    OFFLINE = "OFFLINE"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"


class AllocationMode(StrEnum):
    """``sample``: match against the last sampled availability (the spec's model);
    ``reserve``: against capacity less what running executions were allotted."""

    SAMPLE = "sample"
    RESERVE = "reserve"


class Liveness(NamedTuple):
    """What one server process knows of a worker it has heard from."""

    #: ONLINE or STALE.
    state: WorkerState
    #: Epoch seconds it was last heard.
    last_heard: float
    #: It is draining itself to stop.
    leaving: bool
