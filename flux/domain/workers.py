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


#: Heartbeats a second the server asks of its whole fleet at most (``--max-heartbeats-per-second``).
DEFAULT_MAX_HEARTBEATS_PER_SECOND = 50.0


def paced_interval(declared: float, workers: int, max_per_second: float) -> float:
    """The heartbeat interval a server gives a worker: the worker's own, lengthened so
    that ``workers`` beating together send at most ``max_per_second`` (0: no limit).

    A fleet's heartbeats are most of what an idle server does; Nomad bounds them the
    same way (``max_heartbeats_per_second``, 50 by default there too), and Kubernetes
    renews node leases every 10 s.
    Liveness counts missed beats of this interval, so a large fleet's silent worker is
    found later in proportion (docs/fleet.md#heartbeat-pacing)."""
    if max_per_second <= 0:
        return declared
    return max(declared, workers / max_per_second)
