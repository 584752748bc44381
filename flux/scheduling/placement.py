"""Placement: assign queued executions to workers, in queue order (pure, no I/O).

Each execution goes to ``matching.best`` of the eligible workers with a free slot
(least-loaded first, or the highest score under its routing policy), and takes one
of its slots. Executions that share the same constraints share one eligibility scan
per round, so a queue of many identical requests costs one pass over the fleet
rather than one per execution. Routing is soft and not part of that key: it only
ranks the shared eligible pool, re-scored for each execution because every placement
changes the loads. Unconstrained executions skip the per-candidate checks entirely
(the spec's fast path).
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, NamedTuple

from flux.domain.affinity import affinity_key
from flux.domain.resource_request import ResourceRequest
from flux.domain.routing import RoutingPolicy
from flux.scheduling.allocation import allotment_for, take
from flux.scheduling.matching import WorkerView, best, candidate_key, check, check_resources, is_unconstrained
from flux.scheduling.scoring import score_worker


@dataclass(frozen=True)
class Demand:
    """One queued execution as placement sees it.

    ``affinity`` is the JSON form (string values mean equality, dict values are
    operators; see ``flux.domain.affinity``). ``routing`` ranks eligible workers.
    """

    execution_id: str
    request: ResourceRequest | None
    affinity: Mapping[str, Any] | None
    routing: RoutingPolicy | None = None

    @property
    def constraint_key(self) -> tuple:
        """Equal for demands with the same hard constraints (hashable even with operator dicts)."""
        return (self.request, affinity_key(self.affinity))


@lru_cache(maxsize=4096)
def _request_from_json(text: str) -> ResourceRequest:
    return ResourceRequest.from_dict(json.loads(text))


@lru_cache(maxsize=4096)
def _routing_from_json(text: str) -> RoutingPolicy:
    return RoutingPolicy.from_dict(json.loads(text))


def demand_from_row(
    execution_id: str,
    requests: dict | None,
    affinity: dict | None,
    routing: dict | RoutingPolicy | None = None,
) -> Demand:
    """Build a Demand from stored JSON; parsed requests and routing policies are cached by their text.

    Affinity JSON passes through unchanged (``check_affinity`` reads it directly).
    Stored JSON is expected to have been validated on the way in; an invalid
    ``requests`` or ``routing`` raises ``ValueError`` here.
    """
    request = _request_from_json(json.dumps(requests, sort_keys=True)) if requests else None
    if isinstance(routing, RoutingPolicy):
        policy = routing
    else:
        policy = _routing_from_json(json.dumps(routing, sort_keys=True)) if routing else None
    return Demand(execution_id, request, affinity or None, policy)


class Placement(NamedTuple):
    execution_id: str
    worker_name: str
    #: What was set aside for it (``flux.scheduling.allocation``).
    allotment: dict
    #: Why this worker won, for the claim event and ``flux execution explain``.
    reason: str


def why_chosen(worker: WorkerView, routing: RoutingPolicy | None, eligible: int) -> str:
    if routing is None:
        return f"least loaded of {eligible} eligible: {worker.running}/{worker.slots} slots busy"
    total, terms = score_worker(routing, worker)
    return f"highest score {total:g} of {eligible} eligible ({'; '.join(text for text, _ in terms)})"


def _still_fits(demand: Demand, worker: WorkerView) -> bool:
    """Re-check what placements consume within a round: everything on a reserving
    worker, and custom resources everywhere (they are counted, never sampled)."""
    if worker.reserves or (demand.request is not None and demand.request.resources):
        return check_resources(demand.request, worker) is None
    return True


class _Candidates:
    """The workers eligible for one set of constraints, least loaded on top.

    A lazy heap: a placement changes its worker's load, so an entry whose key is out
    of date is re-pushed when it surfaces, and a worker that filled up (or, under
    reserve, no longer fits) is dropped - within a round neither comes back. Picking
    the least-loaded worker costs O(log n) instead of a scan of the fleet, which
    keeps per-claim cost nearly flat as the fleet grows.
    """

    def __init__(self, workers: list[WorkerView]):
        self.workers = workers
        self.heap = [(candidate_key(w), i, w) for i, w in enumerate(workers) if w.free_slots > 0]
        heapq.heapify(self.heap)

    def best(self, demand: Demand) -> WorkerView | None:
        if demand.routing is not None:  # a policy scores every candidate (scores move with load)
            return best([w for w in self.workers if w.free_slots > 0 and _still_fits(demand, w)], demand.routing)
        while self.heap:
            key, i, worker = self.heap[0]
            if worker.free_slots == 0 or not _still_fits(demand, worker):
                heapq.heappop(self.heap)
            elif key != candidate_key(worker):
                heapq.heapreplace(self.heap, (candidate_key(worker), i, worker))
            else:
                return worker
        return None


def place(demands: Iterable[Demand], workers: list[WorkerView]) -> list[Placement]:
    """Assign in queue order; ``workers`` running counts and allotments are updated."""
    online = [w for w in workers if w.state == "ONLINE"]
    unconstrained = _Candidates(online)
    constrained: dict[tuple, _Candidates] = {}
    assignments = []
    for demand in demands:
        if is_unconstrained(demand.request, demand.affinity):
            candidates = unconstrained
        else:
            key = demand.constraint_key
            if key not in constrained:
                constrained[key] = _Candidates([w for w in online if check(demand.request, demand.affinity, w) is None])
            candidates = constrained[key]
        chosen = candidates.best(demand)
        if chosen is None:
            continue
        reason = why_chosen(chosen, demand.routing, len(candidates.workers))
        allotment = allotment_for(demand.request, chosen)
        take(chosen, allotment)
        chosen.running += 1
        assignments.append(Placement(demand.execution_id, chosen.name, allotment, reason))
    return assignments
