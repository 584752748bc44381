"""``Demand``: one queued execution as placement sees it, and how one is read from storage."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Mapping

from flux.domain.affinity import affinity_key
from flux.domain.namespaces import DEFAULT
from flux.domain.resource_request import ResourceRequest, request_or_none
from flux.domain.routing import RoutingPolicy


@dataclass(frozen=True)
class Demand:
    """One queued execution as placement sees it.

    ``request`` is ``None`` when nothing is requested (an empty request is normalised
    to ``None``). ``affinity`` is the JSON form (string values mean equality, dict
    values are operators; see ``flux.domain.affinity``). ``routing`` ranks eligible
    workers. ``namespace`` is the execution's: a worker restricted to others never takes it.
    """

    execution_id: str
    request: ResourceRequest | None
    affinity: Mapping[str, Any] | None
    routing: RoutingPolicy | None = None
    namespace: str = DEFAULT
    #: Higher is placed first (``flux.domain.priority``; docs/contention.md).
    priority: int = 0
    #: Whether it may preempt lower-priority work when nothing fits (its class's policy).
    may_preempt: bool = True
    #: Its concurrency keys and their limits (rendered at submission).
    keys: tuple[tuple[str, int], ...] = ()
    #: When it was submitted: FIFO within its namespace and priority.
    scheduled_at: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "request", request_or_none(self.request))

    @property
    def unconstrained(self) -> bool:
        """No request and no affinity: any worker with a free slot will do (the fast path)."""
        return self.request is None and not self.affinity

    @cached_property
    def constraint_key(self) -> tuple:
        """Equal for demands with the same hard constraints (hashable even with operator
        dicts); kept, as a round asks for it more than once per demand."""
        return (self.request, affinity_key(self.affinity))


@lru_cache(maxsize=4096)
def _request_from_json(text: str) -> ResourceRequest | None:
    return request_or_none(json.loads(text))


@lru_cache(maxsize=4096)
def _routing_from_json(text: str) -> RoutingPolicy:
    return RoutingPolicy.from_dict(json.loads(text))


def demand_from_row(
    *,
    execution_id: str,
    requests: dict | None,
    affinity: dict | None,
    routing: dict | RoutingPolicy | None = None,
    namespace: str = DEFAULT,
    **contention: Any,
) -> Demand:
    """Build a Demand from stored JSON, by column name; parsed requests and routing
    policies are cached by their text.

    Affinity JSON passes through unchanged (the affinity filter reads it directly).
    ``contention``: ``priority``, ``may_preempt``, ``keys``, ``scheduled_at`` as ``Demand`` has them.
    Stored JSON is expected to have been validated on the way in; an invalid
    ``requests`` or ``routing`` raises ``ValueError`` here.
    """
    request = _request_from_json(json.dumps(requests, sort_keys=True)) if requests else None
    if isinstance(routing, RoutingPolicy):
        policy = routing
    else:
        policy = _routing_from_json(json.dumps(routing, sort_keys=True)) if routing else None
    return Demand(execution_id, request, affinity or None, policy, namespace, **contention)
