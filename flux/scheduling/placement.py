"""Placement: assign queued executions to workers, in queue order (pure, no I/O).

Each execution goes to the first satisfying worker in candidate order (least-loaded
first), and takes one of its slots. Executions that share the same constraints share
one eligibility scan per round, so a queue of many identical requests costs one pass
over the fleet rather than one per execution. Unconstrained executions skip the
per-candidate checks entirely (the spec's fast path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.matching import WorkerView, candidate_key, check, is_unconstrained


@dataclass(frozen=True)
class Demand:
    """One queued execution as placement sees it."""

    execution_id: str
    request: ResourceRequest | None
    affinity: Mapping[str, str] | None

    @property
    def constraint_key(self) -> tuple:
        return (self.request, tuple(sorted((self.affinity or {}).items())))


@lru_cache(maxsize=4096)
def _request_from_json(text: str) -> ResourceRequest:
    return ResourceRequest.from_dict(json.loads(text))


def demand_from_row(execution_id: str, requests: dict | None, affinity: dict | None) -> Demand:
    """Build a Demand from stored JSON; parsed requests are cached by their text."""
    request = _request_from_json(json.dumps(requests, sort_keys=True)) if requests else None
    return Demand(execution_id, request, affinity or None)


def place(demands: Iterable[Demand], workers: list[WorkerView]) -> list[tuple[str, str]]:
    """Return ``(execution_id, worker_name)`` assignments; ``workers`` running counts are updated."""
    free = [w for w in workers if w.free_slots > 0]
    eligible: dict[tuple, list[WorkerView]] = {}
    assignments = []
    for demand in demands:
        if not free:
            break
        if is_unconstrained(demand.request, demand.affinity):
            pool = free
        else:
            key = demand.constraint_key
            if key not in eligible:
                eligible[key] = [w for w in workers if check(demand.request, demand.affinity, w) is None]
            pool = [w for w in eligible[key] if w.free_slots > 0]
        if not pool:
            continue
        chosen = min(pool, key=candidate_key)
        chosen.running += 1
        if chosen.free_slots == 0:
            free.remove(chosen)
        assignments.append((demand.execution_id, chosen.name))
    return assignments
