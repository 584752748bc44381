"""Preemption for a gang: the fewest, least important victims across the workers of one
topology domain so that every member fits (pure, no I/O; docs/gangs.md).

On each worker, as ``flux.scheduling.preemption`` does for one execution: with every
evictable holder gone, how many members fit, and for each count ``k`` the victims that
leave room for ``k`` (give back, most important and oldest first, each holder the ``k``
members still fit without). Across the workers of a domain a small dynamic programme
picks how many members each worker takes so that they add up to ``size`` at the least
cost: first the lowest "most important victim" (tried priority by priority, lowest
first), then the fewest victims, then the lowest sum of priorities, then the youngest.

A member of a running gang is taken only with its whole gang (``gang_of`` names each
holder's gang): gangs are tried, least important and youngest first, only when single
victims cannot make room, and a gang victim stays only when the room is not made
without it. Last, every victim whose staying would still leave room is given back, so
none is needless. Executions already leaving count as gone; what this round placed or
held on a worker (``added``) is never evicted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from flux.domain.allotment import Allotment
from flux.domain.priority import MIN_PRIORITY
from flux.scheduling.gangs import Fit, GangDemand
from flux.scheduling.holders import Holder
from flux.scheduling.preemption import room_view
from flux.scheduling.snapshot import WorkerView

#: (victims' count, sum of their priorities above the least, minus the sum of their claim times): additive.
Cost = tuple[int, int, float]
ZERO: Cost = (0, 0, 0.0)


@dataclass(frozen=True)
class GangRoom:
    """Where a waiting gang goes once its victims leave."""

    domain: str
    #: What must leave (every member of a gang victim, on whichever worker it runs).
    victims: tuple[Holder, ...]
    #: What is already leaving on the domain's workers (a grace period runs).
    leaving: tuple[Holder, ...] = ()

    def key(self) -> tuple:
        if not self.victims:
            return (MIN_PRIORITY - 1, 0, 0, 0.0, self.domain)
        cost = _cost(self.victims)
        return (max(v.priority for v in self.victims), *cost, self.domain)


def _cost(victims: Iterable[Holder]) -> Cost:
    victims = list(victims)
    return (len(victims), sum(v.priority - MIN_PRIORITY for v in victims), -sum(v.claimed_at for v in victims))


def _add(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


class _Domain:
    """One domain's workers and their holders, as the search needs them."""

    def __init__(self, fit: Fit, workers: list[WorkerView], holders: Mapping[str, Sequence[Holder]], added):
        self.fit, self.workers, self.holders, self.added = fit, workers, holders, added

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
        out = [(ZERO, [])]
        ordered = sorted(candidates, key=lambda h: (-h.priority, h.claimed_at))
        for k in range(1, most + 1):
            victims, away = [], set(everyone)
            for holder in ordered:  # give back each one it still fits k without
                away.discard(holder.execution_id)
                if self.held(worker, away) < k:
                    away.add(holder.execution_id)
                    victims.append(holder)
            out.append((_cost(victims), victims))
        return out

    def cheapest(self, size: int, evictable: Callable[[Holder], bool], gone: set[str]) -> list[Holder] | None:
        """The single victims (beside ``gone``) that make room for ``size`` members at the least cost, or None."""
        candidates = {
            w.name: [h for h in self.holders.get(w.name, ()) if h.execution_id not in gone and evictable(h)]
            for w in self.workers
        }
        for ceiling in sorted({h.priority for hs in candidates.values() for h in hs} | {MIN_PRIORITY - 1}):
            found = self._programme(
                size, {n: [h for h in hs if h.priority <= ceiling] for n, hs in candidates.items()}, gone
            )
            if found is not None:
                return found
        return None

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
    for name in sorted(groups, key=lambda g: (-groups[g][0].priority, min(h.claimed_at for h in groups[g]))):
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
) -> GangRoom | None:
    """The victims that make room for ``gd`` in one domain, or None when no choice of them
    can. ``everywhere``: every holder of the fleet (a gang victim's members elsewhere)."""
    gang_of, size = gang_of or {}, gd.gang.size
    search = _Domain(fit, workers, holders, added or {})
    here = [h for w in workers for h in holders.get(w.name, ())]
    leaving = tuple(h for h in here if h.leaving)
    units = _gangs([*everywhere, *here], gang_of)

    def single(holder: Holder) -> bool:
        return evictable(holder) and holder.execution_id not in gang_of

    gone: set[str] = set()
    victims = search.cheapest(size, single, gone)
    present = {h.execution_id for h in here}
    whole = [u for u in units.values() if all(evictable(h) for h in u) and any(h.execution_id in present for h in u)]
    whole.sort(key=lambda u: (u[0].priority, -max(h.claimed_at for h in u)))
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
) -> GangRoom | None:
    """The best domain to make room for ``gd`` in and its victims (``GangRoom.key``: the
    least important most important victim, then the fewest...), or None."""
    fit = Fit(gd.demand, gd.gang, namespace)
    by_domain: dict[str, list[WorkerView]] = {}
    for worker in workers:
        value = worker.labels.get(gd.gang.topology)
        if value is not None:
            by_domain.setdefault(str(value), []).append(worker)
    everywhere = [h for hs in holders.values() for h in hs]
    rooms = [
        domain_room(gd, fit, domain, members, holders, evictable, added, gang_of, everywhere)
        for domain, members in sorted(by_domain.items())
    ]
    found = [room for room in rooms if room is not None]
    return min(found, key=GangRoom.key) if found else None
