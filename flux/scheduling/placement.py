"""Placement: assign queued executions to workers, in queue order (pure, no I/O).

Each execution goes to ``ranking.best`` of the eligible workers with a free slot
(least-loaded first, or the highest score under its routing policy), and takes one
of its slots. Executions that share the same constraints share one eligibility scan
per round, of the workers with a free slot (none gains one within a round), so a
queue of many identical requests costs one pass over them rather than one per
execution. Routing is soft and not part of that key: it only ranks the shared
eligible pool, re-scored for each execution because every placement changes the
loads. A share of a GPU packs onto the cards already shared first
(``flux.scheduling.packing``). Unconstrained executions skip the per-candidate checks
entirely (the spec's fast path): they take the top of the ``FreePool``, which the
server keeps across rounds, so placing one costs O(log n) and no walk of the fleet.
While some worker is restricted to namespaces (``flux.scheduling.namespaces``), the
namespace joins the constraints: one scan per namespace and set of constraints per round."""

from __future__ import annotations

import heapq
from typing import Iterable, NamedTuple

from flux.domain.allotment import EMPTY, Allotment
from flux.scheduling.allocation import Allotter, take
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.filters import PIPELINE, Consumption, Filter, Pipeline, bound, first_bound_failure
from flux.scheduling.filters.gpu import GPUS, Ask, ask_of
from flux.scheduling.namespaces import gate
from flux.scheduling.packing import OpenCards, packing_reason
from flux.scheduling.pool import FreePool
from flux.scheduling.ranking import best, candidate_key, why_chosen
from flux.scheduling.snapshot import WorkerView


class Placement(NamedTuple):
    execution_id: str
    worker_name: str
    #: What was set aside for it (``flux.scheduling.allocation``).
    allotment: Allotment
    #: Why this worker won, for the claim event and ``flux execution explain``.
    reason: str


class _Candidates:
    """The workers eligible for one set of constraints, least loaded on top.

    Built from the round's workers with a free slot, already in least-loaded order (a
    sorted list is a heap, and so is what a filter keeps of it): one check per worker
    that can take work, no key computed and no heap built per set of constraints. A
    lazy heap then: a placement changes its worker's load, so an entry whose key is out
    of date is re-pushed when it surfaces, and a worker that filled up (or no longer
    fits what placements use up) is dropped - within a round neither comes back.
    Picking the least-loaded worker costs O(log n) instead of a scan of the fleet,
    which keeps per-claim cost nearly flat as the fleet grows.
    """

    def __init__(
        self,
        free: list[tuple],
        filters: tuple[Filter, ...],
        demand: Demand,
        checks: tuple = (),
        changing: tuple = (),
        room_checks: tuple = (),
    ):
        #: ``(candidate_key, i, view)`` of each eligible worker with a free slot, least loaded first:
        #: of ``free`` (which passed the static checks), those that pass the ``changing`` ones.
        self.heap = [entry for entry in free if first_bound_failure(changing, entry[2]) is None]
        self.workers = [w for _, _, w in self.heap]
        #: The filters active for these constraints: they allot and take for each placement.
        self.filters = filters
        #: The same bound to them (and the namespace gate when one applies).
        self.checks = checks
        #: What a search for room checks on a worker whose static verdict it already has:
        #: the gate and the filters that change (no leaving changes labels or packages).
        self.room_checks = room_checks
        #: What each placement sets aside.
        self.allot = Allotter(filters, demand.affinity)
        #: What placements within the round can use up, so is checked again before a
        #: worker is chosen: on any worker, and on a reserving one.
        self.counted = bound((f for f in filters if f.consumed is Consumption.ALWAYS), demand.request, demand.affinity)
        self.reserved = bound(
            (f for f in filters if f.consumed is not Consumption.NEVER), demand.request, demand.affinity
        )
        #: Those with a free slot now: a worker that filled up earlier in the round is not
        #: counted, whichever way ``free`` was found (a kept pool's verdicts or a fresh walk).
        self.eligible = sum(1 for w in self.workers if w.free_slots > 0)
        #: A share of a card packs (``flux.scheduling.packing``): what it asks, and who may take it.
        self.share: Ask | None = (
            ask_of(demand.request, demand.affinity) if GPUS in filters and demand.request.shares_gpu else None
        )
        self._names = {w.name for w in self.workers} if self.share is not None else set()

    def _still_fits(self, worker: WorkerView) -> bool:
        recheck = self.reserved if worker.reserves else self.counted
        return not recheck or first_bound_failure(recheck, worker) is None

    def accepts(self, worker: WorkerView) -> bool:
        """Eligible, with a free slot, and still fitting what placements used up."""
        return worker.name in self._names and worker.free_slots > 0 and self._still_fits(worker)

    def best(self, demand: Demand) -> WorkerView | None:
        if demand.routing is not None:  # a policy scores every candidate (scores move with load)
            return best([w for w in self.workers if w.free_slots > 0 and self._still_fits(w)], demand.routing)
        while self.heap:
            key, i, worker = self.heap[0]
            if worker.free_slots == 0 or not self._still_fits(worker):
                heapq.heappop(self.heap)
            elif key != candidate_key(worker):
                heapq.heapreplace(self.heap, (candidate_key(worker), i, worker))
            else:
                return worker
        return None


class _Unconstrained:
    """Every ONLINE worker is eligible: the pool's own heap, kept across rounds."""

    filters: tuple[Filter, ...] = ()
    checks: tuple = ()
    room_checks: tuple = ()
    share = None

    @staticmethod
    def allot(request: object, worker: WorkerView) -> Allotment:
        return EMPTY

    def __init__(self, pool: FreePool):
        self.pool = pool
        self.eligible = pool.online_count
        self._online: list[tuple] | None = None

    def online(self) -> list[tuple]:
        """Every ONLINE worker with a free slot as ``(candidate_key, i, view)``, least loaded
        first, built once per round and only if constrained or routed work asks (a worker
        never gains a slot within a round, so a full fleet's scans cost the few with one)."""
        if self._online is None:
            self._online = sorted(
                (candidate_key(w), i, w) for i, w in enumerate(self.pool.online()) if w.free_slots > 0
            )
        return self._online

    def best(self, demand: Demand) -> WorkerView | None:
        if demand.routing is not None:
            return best([w for _, _, w in self.online() if w.free_slots > 0], demand.routing)
        return self.pool.best()


def _candidates(unconstrained: _Unconstrained, key: tuple, demand: Demand, namespace: str | None) -> _Candidates:
    """The eligible workers for one set of constraints: the static verdicts as the pool
    keeps them across rounds (``flux.scheduling.registered``), then what changes between
    rounds, checked on the workers that passed them."""
    pool = unconstrained.pool
    filters = pool.pipeline.active(demand.request, demand.affinity)
    gated = (gate(namespace),) if namespace is not None else ()
    checks = gated + bound(filters, demand.request, demand.affinity)  # in pipeline order: the reason of a refusal
    static = gated + tuple(c for f, c in zip(filters, checks[len(gated) :]) if f.static)
    changing = tuple(c for f, c in zip(filters, checks[len(gated) :]) if not f.static)
    free = unconstrained.online()
    if static:
        free = pool.registered.free_passing(key, static, pool.views, free)
    return _Candidates(free, filters, demand, checks, changing, gated + changing)


def place(
    demands: Iterable[Demand],
    workers: list[WorkerView] | FreePool,
    contention: Contention | None = None,
    limit: int | None = None,
    *,
    pipeline: Pipeline = PIPELINE,
) -> list[Placement]:
    """Assign in queue order; the workers' running counts and allotments are updated
    (in their views, and in the pool: ``FreePool.put``). ``contention`` collects what
    waits and why, and the preemptions the round decided. ``limit``: stop after that
    many placements (``demands`` is read no further). ``pipeline``: the filters, when
    ``workers`` is a list (a ``FreePool`` carries its own)."""
    pool = workers if isinstance(workers, FreePool) else FreePool(workers, pipeline)
    unconstrained = _Unconstrained(pool)
    constrained: dict[tuple, _Candidates] = {}
    cards: OpenCards | None = None  # the shared cards, once a share asks
    assignments = []
    for demand in demands:
        if contention is not None:
            refused = contention.refusal(demand)
            if refused is not None:
                contention.waiting[demand.execution_id] = refused
                continue
        namespace = demand.namespace if pool.restricted else None
        if demand.unconstrained and namespace is None:
            candidates = unconstrained
        else:
            key = (demand.constraint_key, namespace)
            candidates = constrained.get(key)
            if candidates is None:
                candidates = constrained[key] = _candidates(unconstrained, key, demand, namespace)
        packed = None
        if candidates.share is not None and demand.routing is None:
            cards = cards or OpenCards(pool.views.values())
            packed = cards.best(candidates.share, pool.views, candidates.accepts)
        chosen = packed or candidates.best(demand)
        if chosen is None:
            if contention is not None:
                contention.make_room(demand, candidates.room_checks, candidates.filters, pool)
            continue
        reason = (
            packing_reason(chosen, candidates.eligible)
            if packed
            else why_chosen(chosen, demand.routing, candidates.eligible)
        )
        allotment = candidates.allot(demand.request, chosen)
        take(candidates.filters, chosen, allotment)
        if cards is not None and allotment.devices:
            cards.taken(chosen, allotment)
        chosen.running += 1
        pool.put(chosen)
        assignments.append(Placement(demand.execution_id, chosen.name, allotment, reason))
        if contention is not None:
            contention.placed(demand, chosen.name, allotment)
        if limit is not None and len(assignments) >= limit:
            break
    return assignments
