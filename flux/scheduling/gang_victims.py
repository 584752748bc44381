"""Preemption for a gang: the cheapest victims across the workers of one topology
domain so that every member fits (pure, no I/O; docs/gangs.md).

A set of victims costs what ``preemption.Costs.key`` says it costs for a single
execution (docs/contention.md: the preempted within their cooldown, those within their
``min_runtime``, the most important priority, the sum of priorities, the work lost, the
count, the youngest), so one rule ranks victims for both. On each worker, as
``preemption.find_room`` does: with every evictable holder gone, how many members fit,
and for each count ``k`` the victims that leave room for ``k`` (``victims_of``: give
back, costliest to lose first, each holder the ``k`` members still fit without). Across
the workers of a domain a small dynamic programme picks how many members each worker
takes so that they add up to ``size`` at the least additive cost (cooling, young, sum of
priorities, work lost, count), once per ceiling on the most important victim's priority;
the cheapest of those by ``Costs.key`` wins, which is the cheapest of all.

A member of a running gang is taken only with its whole gang (``gang_of`` names each
holder's gang): gangs are tried, cheapest first, only when single victims cannot make
room. Last, every victim (a gang whole) whose staying would still leave room is given
back, costliest first, so none is needless. Executions already leaving count as gone;
what this round placed or held on a worker (``added``) is never evicted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from flux.domain.allotment import Allotment
from flux.domain.priority import MIN_PRIORITY
from flux.scheduling.gangs import Fit, GangDemand
from flux.scheduling.holders import Holder
from flux.scheduling.preemption import Costs, room_view, victims_of
from flux.scheduling.snapshot import WorkerView

#: What the programme adds up per victim: (cooling, young, priority above the least, work lost, 1).
Cost = tuple[int, int, int, float, int]
ZERO: Cost = (0, 0, 0, 0.0, 0)


@dataclass(frozen=True)
class GangRoom:
    """Where a waiting gang goes once its victims leave."""

    domain: str
    #: What must leave (every member of a gang victim, on whichever worker it runs).
    victims: tuple[Holder, ...]
    #: What is already leaving on the domain's workers (a grace period runs).
    leaving: tuple[Holder, ...] = ()


def _cost(costs: Costs, victims: Iterable[Holder]) -> Cost:
    total = ZERO
    for v in victims:
        total = _add(total, (costs.cooling(v), costs.young(v), v.priority - MIN_PRIORITY, costs.lost(v), 1))
    return total


def _add(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4])


class _Domain:
    """One domain's workers and their holders, as the search needs them."""

    def __init__(self, fit: Fit, workers: list[WorkerView], holders: Mapping[str, Sequence[Holder]], added, costs):
        self.fit, self.workers, self.holders, self.added, self.costs = fit, workers, holders, added, costs

    def held(self, worker: WorkerView, gone: set[str]) -> int:
        """Members ``worker`` holds with the holders in ``gone`` (and the leaving) away."""
        staying = [*self.added.get(worker.name, ())]
        staying += [
            h.allotment for h in self.holders.get(worker.name, ()) if not h.leaving and h.execution_id not in gone
        ]
        return len(self.fit.members(room_view(worker, staying, self.fit.filters))[0])

    def options(self, worker: WorkerView, candidates: list[Holder], gone: set[str]) -> list[tuple[Cost, list[Holder]]]:
        """For k = 0, 1, ... members on ``worker``: the cost and victims (of ``candidates``) that make room."""
        everyone = gone | {c.execution_id for c in candidates}
        most = self.held(worker, everyone)
        out: list[tuple[Cost, list[Holder]]] = [(ZERO, [])]
        for k in range(1, most + 1):
            away = set(everyone)

            def keep(holder: Holder, k: int = k, away: set[str] = away) -> bool:
                away.discard(holder.execution_id)
                if self.held(worker, away) >= k:
                    return True
                away.add(holder.execution_id)
                return False

            victims = list(victims_of(candidates, keep, self.costs))
            out.append((_cost(self.costs, victims), victims))
        return out

    def cheapest(self, size: int, evictable: Callable[[Holder], bool], gone: set[str]) -> list[Holder] | None:
        """The single victims (beside ``gone``) that make room for ``size`` members at the least cost, or None."""
        candidates = {
            w.name: [h for h in self.holders.get(w.name, ()) if h.execution_id not in gone and evictable(h)]
            for w in self.workers
        }
        best = None
        for ceiling in sorted({h.priority for hs in candidates.values() for h in hs} | {MIN_PRIORITY - 1}):
            found = self._programme(
                size, {n: [h for h in hs if h.priority <= ceiling] for n, hs in candidates.items()}, gone
            )
            if found is not None and (best is None or self.costs.key(found) < self.costs.key(best)):
                best = found
        return best

    def _programme(self, size: int, candidates: dict[str, list[Holder]], gone: set[str]) -> list[Holder] | None:
        best: dict[int, tuple[Cost, list[Holder]]] = {0: (ZERO, [])}
        for worker in self.workers:
            step = dict(best)
            for k, (cost, victims) in enumerate(self.options(worker, candidates[worker.name], gone)):
                if k == 0:
                    continue
                for m, (so_far, chosen) in best.items():
                    total, reach = _add(so_far, cost), min(size, m + k)
                    if reach not in step or total < step[reach][0]:
                        step[reach] = (total, chosen + victims)
            best = step
        return best[size][1] if size in best else None

    def total(self, gone: set[str]) -> int:
        return sum(self.held(w, gone) for w in self.workers)


def _gangs(holders: Iterable[Holder], gang_of: Mapping[str, str]) -> dict[str, list[Holder]]:
    """The running gangs among ``holders`` (each holder once), by gang."""
    units: dict[str, dict[str, Holder]] = {}
    for holder in holders:
        if holder.execution_id in gang_of and not holder.leaving:
            units.setdefault(gang_of[holder.execution_id], {})[holder.execution_id] = holder
    return {name: list(members.values()) for name, members in units.items()}


def _prune(domain: _Domain, size: int, victims: list[Holder], gang_of: Mapping[str, str]) -> list[Holder]:
    """Give back every victim (a gang whole) whose staying still leaves room, most important first."""
    kept = list(victims)
    groups: dict[str, list[Holder]] = {}
    for v in kept:
        groups.setdefault(gang_of.get(v.execution_id, v.execution_id), []).append(v)
    for name in sorted(groups, key=lambda g: min(domain.costs.keep_order(h) for h in groups[g])):
        trial = [v for v in kept if gang_of.get(v.execution_id, v.execution_id) != name]
        if domain.total({v.execution_id for v in trial}) >= size:
            kept = trial
    return kept


def domain_room(
    gd: GangDemand,
    fit: Fit,
    domain: str,
    workers: list[WorkerView],
    holders: Mapping[str, Sequence[Holder]],
    evictable: Callable[[Holder], bool],
    added: Mapping[str, Sequence[Allotment]] | None = None,
    gang_of: Mapping[str, str] | None = None,
    everywhere: Iterable[Holder] = (),
    costs: Costs | None = None,
) -> GangRoom | None:
    """The victims that make room for ``gd`` in one domain, or None when no choice of them
    can. ``everywhere``: every holder of the fleet (a gang victim's members elsewhere)."""
    gang_of, size, costs = gang_of or {}, gd.gang.size, costs or Costs()
    search = _Domain(fit, workers, holders, added or {}, costs)
    here = [h for w in workers for h in holders.get(w.name, ())]
    leaving = tuple(h for h in here if h.leaving)
    units = _gangs([*everywhere, *here], gang_of)

    def single(holder: Holder) -> bool:
        return evictable(holder) and holder.execution_id not in gang_of

    gone: set[str] = set()
    victims = search.cheapest(size, single, gone)
    present = {h.execution_id for h in here}
    whole = [u for u in units.values() if all(evictable(h) for h in u) and any(h.execution_id in present for h in u)]
    whole.sort(key=costs.key)
    taken: list[Holder] = []
    for unit in whole:
        if victims is not None:
            break
        taken += unit
        gone = {h.execution_id for h in taken}
        victims = search.cheapest(size, single, gone)
    if victims is None:
        return None
    unique = {h.execution_id: h for h in [*taken, *victims]}
    return GangRoom(domain, tuple(_prune(search, size, list(unique.values()), gang_of)), leaving)


def gang_room(
    gd: GangDemand,
    workers: Iterable[WorkerView],
    holders: Mapping[str, Sequence[Holder]],
    evictable: Callable[[Holder], bool],
    added: Mapping[str, Sequence[Allotment]] | None = None,
    gang_of: Mapping[str, str] | None = None,
    namespace: str | None = None,
    costs: Costs | None = None,
) -> GangRoom | None:
    """The domain where making room for ``gd`` costs least (``Costs.key`` of its victims,
    then the domain's value) and its victims, or None."""
    costs = costs or Costs()
    fit = Fit(gd.demand, gd.gang, namespace)
    by_domain: dict[str, list[WorkerView]] = {}
    for worker in workers:
        value = worker.labels.get(gd.gang.topology)
        if value is not None:
            by_domain.setdefault(str(value), []).append(worker)
    everywhere = [h for hs in holders.values() for h in hs]
    rooms = [
        domain_room(gd, fit, domain, members, holders, evictable, added, gang_of, everywhere, costs)
        for domain, members in sorted(by_domain.items())
    ]
    found = [room for room in rooms if room is not None]
    return min(found, key=lambda room: (costs.key(room.victims), room.domain)) if found else None
