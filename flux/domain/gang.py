"""``Gang``: one execution run as several members placed together, all or nothing.

A gang is a job larger than one machine (distributed training, an MPI ring): ``size``
members, each with the workflow's ``ResourceRequest`` (the request is per member), placed
only when every member fits at once, all on workers that share one value of the
``topology`` label (a rack, a zone, an NVLink domain). ``prefer`` is a softer label: the
members pack into as few of its values as possible. ``per_worker`` is how many members
one worker may hold (eight 1-GPU members on one 8-GPU worker with ``per_worker=8``).
``start_timeout`` is how long the placed members have to all start before the gang
fails as one and is placed again.

The value is validated when it is made, so a bad gang fails at decoration, and the
server makes it again from the JSON form at registration (a 422 naming the field).
``size`` is capped by the server (``DEFAULT_MAX_SIZE`` unless it says otherwise): the
decorator checks the default cap, or ``max_size=`` when a server allows more; the
server checks its own with ``from_dict(data, max_size=...)``. Model: docs/gangs.md.

A started member sees its ``GangContext`` as ``ctx.gang`` (its rank, the gang's size, rank
0's address and port, every member by rank) and, in its process environment, what
``GangContext.env`` gives: the variables torch.distributed's ``env://`` reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from flux.domain import labels
from flux.domain.durations import InvalidDuration, format_duration, parse_duration
from flux.domain.numbers import is_number

#: The server's cap on ``size`` unless it is started with another (a gang of 256 8-GPU
#: members is 2,048 GPUs: beyond that, one placement round's search is the cost to watch).
DEFAULT_MAX_SIZE = 256
#: How long placed members have to all start, unless the gang says otherwise.
DEFAULT_START_TIMEOUT = 300.0
FIELDS = ("size", "topology", "prefer", "per_worker", "start_timeout")

#: A label key as Kubernetes spells one: ``[prefix/]name``, the prefix a DNS subdomain
#: (``topology.kubernetes.io``), the name letters, digits, '-', '_' and '.' between an
#: alphanumeric first and last character. Lengths are ``flux.domain.labels``' rule.
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


class InvalidGang(ValueError):
    """A gang field could not be validated; the message names the field and value."""


def label_key_problem(key: Any) -> str | None:
    """What keeps ``key`` from being a label key, or None (``rack``, ``topology.kubernetes.io/zone``)."""
    if not isinstance(key, str) or not key:
        return f"must be a label key such as 'rack' or 'topology.kubernetes.io/zone', got {key!r}"
    length = labels.key_problem(key)
    if length:
        return length
    prefix, slash, name = key.rpartition("/")
    if not _NAME.fullmatch(name) or (slash and not _PREFIX.fullmatch(prefix)):
        return (
            f"{key!r} is not a label key: [prefix/]name, the name letters, digits, '-', '_' or '.' "
            "starting and ending with a letter or digit, the prefix a lowercase DNS name"
        )
    return None


def _count(value: Any, field: str, least: int, most: int, over: str) -> int:
    if not is_number(value) or not float(value).is_integer():
        raise InvalidGang(f"Gang.{field}: must be a whole number, got {value!r}")
    if value < least:
        raise InvalidGang(f"Gang.{field}: must be at least {least}, got {value!r}")
    if value > most:
        raise InvalidGang(f"Gang.{field}: {value!r} is more than {over}, {most}")
    return int(value)


def _size(value: Any, max_size: int) -> int:
    return _count(value, "size", 2, max_size, "the server's cap on gang size")


def _key(value: Any, field: str) -> str:
    problem = label_key_problem(value)
    if problem:
        raise InvalidGang(f"Gang.{field}: {problem}")
    return value


@dataclass(frozen=True, init=False)
class Gang:
    """``size`` members, each with the workflow's request, placed all or nothing on one
    ``topology`` domain (``Gang(size=4, topology="rack", per_worker=1, start_timeout="5m")``)."""

    size: int
    #: The label whose value every member's worker shares (required: what "together" means).
    topology: str
    #: A label to pack the members into as few values of as possible (soft); None: no preference.
    prefer: str | None
    #: How many members one worker may hold.
    per_worker: int
    #: Seconds the placed members have to all start.
    start_timeout: float

    def __init__(
        self,
        *,
        size: Any,
        topology: Any,
        prefer: Any = None,
        per_worker: Any = 1,
        start_timeout: Any = DEFAULT_START_TIMEOUT,
        max_size: int = DEFAULT_MAX_SIZE,
    ):
        set_ = object.__setattr__
        set_(self, "size", _size(size, max_size))
        set_(self, "topology", _key(topology, "topology"))
        set_(self, "prefer", None if prefer is None else _key(prefer, "prefer"))
        if self.prefer == self.topology:
            raise InvalidGang(
                f"Gang.prefer: {prefer!r} is the topology itself, where every member already is; "
                "name another label, or leave prefer out"
            )
        set_(self, "per_worker", _count(per_worker, "per_worker", 1, self.size, "the gang's size"))
        try:
            set_(self, "start_timeout", parse_duration(start_timeout, "Gang.start_timeout"))
        except InvalidDuration as exc:
            raise InvalidGang(str(exc)) from None

    @property
    def workers_needed(self) -> int:
        """The fewest workers that can hold it (``size`` over ``per_worker``, rounded up)."""
        return -(-self.size // self.per_worker)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], max_size: int = DEFAULT_MAX_SIZE) -> Gang:
        """From the JSON form (the API's ``gang`` field, the workflow version row), against
        the server's cap ``max_size``; unknown fields are refused by name."""
        if not isinstance(data, Mapping) or not all(isinstance(key, str) for key in data):
            raise InvalidGang(f"Gang: expected a mapping of field names, got {data!r}")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise InvalidGang(
                f"Gang got unknown field(s) {', '.join(map(repr, unknown))}; fields are {', '.join(FIELDS)}"
            )
        return cls(**data, max_size=max_size)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; ``prefer`` only when set."""
        data: dict[str, Any] = {"size": self.size, "topology": self.topology}
        if self.prefer is not None:
            data["prefer"] = self.prefer
        data["per_worker"] = self.per_worker
        data["start_timeout"] = self.start_timeout
        return data

    def with_size(self, size: Any, max_size: int = DEFAULT_MAX_SIZE) -> Gang:
        """This gang with another size (a run's ``--gang-size``); ``per_worker`` is kept
        within it."""
        size = _size(size, max_size)
        return Gang(**{**self.to_dict(), "size": size, "per_worker": min(self.per_worker, size)}, max_size=max_size)

    def describe(self) -> str:
        """Short and human: "4 members in one rack, prefer zone, 1 a worker, start within 5m"."""
        parts = [f"{self.size} members in one {self.topology}"]
        if self.prefer is not None:
            parts.append(f"prefer {self.prefer}")
        parts.append(f"{self.per_worker} a worker")
        parts.append(f"start within {format_duration(self.start_timeout)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class GangMember:
    """One member of a started gang: its rank, the worker it runs on, and the
    ``host:port`` it gave at the rendezvous (None where it is not known)."""

    rank: int
    worker: str
    address: str | None = None


@dataclass(frozen=True)
class GangContext:
    """What a member of a started gang sees as ``ctx.gang``: its seat (``rank`` of
    ``size``, ``local_rank`` of the ``local_size`` members on its worker), rank 0's
    address and port (``master_addr``, ``master_port``: where torch.distributed's
    rendezvous listens) and every member by rank. None for an execution that is not a gang
    member."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    master_addr: str
    master_port: int
    members: tuple[GangMember, ...] = ()

    def env(self) -> dict[str, str]:
        """The variables torch.distributed's ``env://`` reads (and ``torchrun`` sets): a
        member's process has them in its environment, so ``init_process_group`` needs no
        arguments."""
        return {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.size),
            "LOCAL_RANK": str(self.local_rank),
            "LOCAL_WORLD_SIZE": str(self.local_size),
        }
