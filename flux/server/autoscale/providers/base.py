"""The one interface every provider implements: ask for some workers, stop others.

A ``Change`` says everything a provider may need of one pass's decision for one pool:
the template (to start workers that advertise it), the names to start, the workers to
stop (each with the handle the provider gave it), and the size the pool has after it
(a Deployment's replicas). A provider raises ``ProviderError`` with a line a person can
act on; the scaling loop reports it in the pool's state and backs off.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping

from flux.scheduling.autoscale import POOL_LABEL


class ProviderError(Exception):
    """A provider could not do what it was asked (the message is shown in ``flux pool show``)."""


@dataclass(frozen=True)
class Stop:
    name: str
    #: What the provider said when it started it (the local provider: a process id).
    handle: str | None = None


@dataclass(frozen=True)
class Change:
    pool: str
    #: The provider's kind: local, kubernetes or command.
    provider: str
    labels: Mapping[str, str]
    #: cpu, memory, disk and custom resources (quantities: cores, bytes, counts).
    resources: Mapping[str, float]
    gpus: int
    slots: int
    options: Mapping[str, Any]
    start: tuple[str, ...] = ()
    stop: tuple[Stop, ...] = ()
    #: Workers the pool has once this change is done.
    size: int = 0


@dataclass(frozen=True)
class Context:
    """What the server tells providers about itself."""

    server_url: str
    #: Where the local provider keeps its workers' logs.
    home: str
    #: The registration token a started worker needs (given in its environment, never argv).
    bootstrap_token: str = field(repr=False)


#: The template's dimensions a worker probes rather than advertises.
PROBED = ("cpu", "memory", "disk")


def custom_resources(change: Change) -> dict[str, float]:
    """The template's countable resources, which a worker advertises with ``--resource``."""
    return {name: amount for name, amount in change.resources.items() if name not in PROBED}


def worker_labels(change: Change) -> dict[str, str]:
    """The template's labels and ``flux.pool=NAME``, which every worker of a pool carries."""
    return {**change.labels, POOL_LABEL: change.pool}


class Provider(ABC):
    def __init__(self, context: Context):
        self.context = context

    def prepare(self) -> None:
        """A pool of this kind exists: get ready to start workers fast (in the background)."""

    @abstractmethod
    async def apply(self, change: Change) -> dict[str, str]:
        """Start and stop what ``change`` says; the handles of the workers it started, by name."""

    async def close(self) -> None:
        """The server is stopping."""
