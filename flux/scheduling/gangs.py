"""Gang placement: where the members of a gang go, all or nothing (pure, no I/O; docs/gangs.md).

A gang (``flux.domain.gang.Gang``) is ``size`` members, each asking the workflow's
request, placed only when all of them fit at once on workers that share one value of
the ``topology`` label (a *domain*: a rack, a zone). Nothing is set aside for a gang
that only partly fits. Whether it may start at all (quotas, concurrency keys, counted
as ``size`` x its request) is a separate, earlier step (``flux.scheduling.gang_admission``),
as Kueue keeps admission apart from the placement of a workload's pods.

Each worker is asked how many members it holds (``Fit.members``): at most
``per_worker``, each member allotted by the same filters and ``Allotter`` a single
execution is, and counted against a copy of the worker's view as placements within a
round are. A gang's members never share a device or over-commit a worker among
themselves, whatever the worker's allocation mode: the copy books them as a reserving
worker would. A worker holds ``k`` members exactly when its first ``k`` allotments fit,
so the count is the most it can hold, and a domain holds the gang when the counts of
its workers add up to ``size``.

Among the domains that hold it, the members go where they span the fewest values of
``prefer`` (the largest groups first is what minimises that count), then to the domain
with the fewest free member slots (its workers' free slots, at most ``per_worker`` each:
best fit, so the larger domains stay whole for larger gangs, as Kueue's topology-aware
scheduling does), then by the domain's value. Within it, the workers that hold the most
members come first (a gang packs onto few workers), then the least loaded; rank 0 is
the first member on the first of them.

A ``Board`` holds the counts for one kind of gang (constraints, topology, prefer,
``per_worker``), counts a domain only when a search reaches it, and is told of the
workers that changed, so a round that meets many gangs of one kind counts each worker
once and then only those the round changed (``flux.scheduling.gang_round``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from flux.domain.allotment import Allotment
from flux.domain.gang import Gang
from flux.domain.workers import AllocationMode, WorkerState
from flux.scheduling.allocation import Allotter, take
from flux.scheduling.demand import Demand
from flux.scheduling.explain import DRAINED, DRAINING, STALE
from flux.scheduling.filters import PIPELINE, Filter, Pipeline, Reason, bound, first_bound_failure
from flux.scheduling.namespaces import gate
from flux.scheduling.ranking import candidate_key
from flux.scheduling.snapshot import WorkerView


def _no_slot(worker: WorkerView) -> Reason:
    """Why a worker takes no (more) members for want of a slot, as explain says it."""
    if worker.state == WorkerState.STALE:
        return STALE
    if worker.state != WorkerState.ONLINE:
        return DRAINED if worker.shown_state == WorkerState.DRAINED else DRAINING
    return Reason("slots", "all slots busy", f"all {worker.max_concurrent_executions} slots busy")


@dataclass(frozen=True)
class GangDemand:
    """One waiting gang: ``demand`` is one member as placement sees it (its request is per
    member; namespace, priority and keys are the gang's), ``gang`` the shape."""

    demand: Demand
    gang: Gang

    @property
    def execution_id(self) -> str:
        return self.demand.execution_id

    @property
    def kind(self) -> tuple:
        """Equal for gangs whose members any worker holds equally many of (the size aside)."""
        g = self.gang
        return (self.demand.constraint_key, g.topology, g.prefer, g.per_worker)


class Member(NamedTuple):
    rank: int
    worker: str
    #: What is set aside for this member on its worker (``flux.scheduling.allocation``).
    allotment: Allotment


@dataclass(frozen=True)
class GangPlacement:
    execution_id: str
    #: The topology value every member's worker shares.
    domain: str
    members: tuple[Member, ...]
    #: Why there, for the claim event and ``flux execution explain``.
    reason: str

    @property
    def workers(self) -> tuple[str, ...]:
        """The workers it holds, in rank order, each once."""
        return tuple(dict.fromkeys(m.worker for m in self.members))


class Fit:
    """How many members of one kind of gang a worker holds, with their allotments."""

    def __init__(self, demand: Demand, gang: Gang, namespace: str | None = None, pipeline: Pipeline = PIPELINE):
        self.request, self.per_worker = demand.request, gang.per_worker
        self.filters: tuple[Filter, ...] = pipeline.active(demand.request, demand.affinity)
        gated = (gate(namespace),) if namespace is not None else ()
        self.checks = gated + bound(self.filters, demand.request, demand.affinity)
        self.allot = Allotter(self.filters, demand.affinity)

    def members(self, worker: WorkerView) -> tuple[tuple[Allotment, ...], Reason | None]:
        """The allotments of as many members as ``worker`` holds (``per_worker`` at most),
        and why it holds no more (None when ``per_worker`` stopped it)."""
        view = worker.evolve(allocation=AllocationMode.RESERVE)  # members never share among themselves
        allotments: list[Allotment] = []
        while len(allotments) < self.per_worker:
            if view.free_slots <= 0:
                return tuple(allotments), _no_slot(view)
            reason = first_bound_failure(self.checks, view)
            if reason is not None:
                return tuple(allotments), reason
            allotment = self.allot(self.request, view)
            take(self.filters, view, allotment)
            view.running += 1
            allotments.append(allotment)
        return tuple(allotments), None


class Seat(NamedTuple):
    """A worker of a domain and what it holds of the gang."""

    view: WorkerView
    allotments: tuple[Allotment, ...]
    #: The worker's ``prefer`` label (None: absent, a group of its own).
    group: str | None


class Board:
    """What each worker holds of one kind of gang, by domain, kept up to date with
    ``update`` for the workers that changed.

    A domain's workers are counted (``Fit.members``, the costly part) only as far as a
    search needs them: ``best`` visits the domains whose bound (what each counted worker
    holds, the free slots of the others, at most ``per_worker`` each) reaches the gang's
    size, tightest first, and counts a domain's workers least loaded first until they hold
    the gang (all of them when those span more than one ``prefer`` value: fewer may do);
    ``count_all`` counts the rest, for an explanation."""

    def __init__(self, fit: Fit, gang: Gang, workers: Iterable[WorkerView] = ()):
        self.fit, self.topology, self.prefer, self.per_worker = fit, gang.topology, gang.prefer, gang.per_worker
        #: domain -> worker name -> its view (every worker with the topology label).
        self.views: dict[str, dict[str, WorkerView]] = {}
        #: domain -> the most members its workers could hold: what each counted one holds,
        #: the free slots (at most ``per_worker``) of each other one.
        self.bounds: Counter[str] = Counter()
        #: worker name -> its part of its domain's bound.
        self.bound_of: dict[str, int] = {}
        #: domain -> the names still to count, the next last (a domain is here once a search reached it).
        self.pending: dict[str, list[str]] = {}
        #: Workers of reached domains not counted yet.
        self.uncounted: set[str] = set()
        #: domain -> worker name -> its seat (counted workers that hold at least one member).
        self.seats: dict[str, dict[str, Seat]] = {}
        #: domain -> how many members its counted workers hold together.
        self.totals: Counter[str] = Counter()
        #: domain -> worker name -> why it holds no (more) members.
        self.why: dict[str, dict[str, Reason]] = {}
        #: Workers without the topology label, by name.
        self.unlabelled: set[str] = set()
        #: worker name -> its domain.
        self.domain_of: dict[str, str] = {}
        per_worker, views, bounds = self.per_worker, self.views, self.bounds
        for worker in workers:  # ``update`` for a fleet new to the board, in one pass
            domain = worker.labels.get(self.topology)
            if domain is None:
                self.unlabelled.add(worker.name)
                continue
            domain = self.domain_of[worker.name] = str(domain)
            views.setdefault(domain, {})[worker.name] = worker
            part = self.bound_of[worker.name] = min(per_worker, worker.free_slots)
            bounds[domain] += part

    def update(self, worker: WorkerView) -> None:
        """``worker``'s view is new or changed: what it holds is counted again when a
        search next needs it."""
        name, domain = worker.name, worker.labels.get(self.topology)
        before = self.domain_of.get(name)
        if before is not None and before == domain and domain not in self.pending:  # not reached: its bound only
            self.views[domain][name] = worker
            self._bound(domain, name, min(self.per_worker, worker.free_slots))
            return
        waiting = name in self.uncounted
        self.drop(name)
        if domain is None:
            self.unlabelled.add(name)
            return
        domain = self.domain_of[name] = str(domain)
        self.views.setdefault(domain, {})[name] = worker
        self._bound(domain, name, min(self.per_worker, worker.free_slots))
        queue = self.pending.get(domain)
        if queue is not None:  # counted again when a search next needs it, before the others
            if waiting and before == domain:
                queue.remove(name)
            queue.append(name)
            self.uncounted.add(name)

    def _bound(self, domain: str, name: str, part: int) -> None:
        self.bounds[domain] += part - self.bound_of.get(name, 0)
        self.bound_of[name] = part

    def _count(self, domain: str, worker: WorkerView) -> None:
        allotments, reason = self.fit.members(worker)
        self._bound(domain, worker.name, len(allotments))
        if allotments:
            group = worker.labels.get(self.prefer) if self.prefer is not None else None
            seat = Seat(worker, allotments, None if group is None else str(group))
            self.seats.setdefault(domain, {})[worker.name] = seat
            self.totals[domain] += len(allotments)
        if reason is not None:
            self.why.setdefault(domain, {})[worker.name] = reason

    def drop(self, name: str) -> None:
        """The worker is gone (or about to be counted again)."""
        self.unlabelled.discard(name)
        self.uncounted.discard(name)
        domain = self.domain_of.pop(name, None)
        if domain is None:
            return
        self.views[domain].pop(name)
        self.bounds[domain] -= self.bound_of.pop(name)
        old = self.seats.get(domain, {}).pop(name, None)
        if old is not None:
            self.totals[domain] -= len(old.allotments)
        self.why.get(domain, {}).pop(name, None)

    def took(self, placement: GangPlacement) -> None:
        """This board's own members were booked (``claim``): each worker holds what is left
        of its seat, the allotments counted after theirs (what counting it again would
        find on a reserving worker; no more than that on a sampling one), and is counted
        again only when nothing is left."""
        taken = Counter(m.worker for m in placement.members)
        for name, count in taken.items():
            domain = self.domain_of[name]
            seat = self.seats[domain].pop(name)
            self.totals[domain] -= count
            if len(seat.allotments) > count:
                self.seats[domain][name] = seat._replace(allotments=seat.allotments[count:])
                self._bound(domain, name, len(seat.allotments) - count)
            elif name in self.why.get(domain, {}) and seat.view.reserves:
                self._bound(domain, name, 0)  # its count stopped at a resource, which it has still less of now
            else:
                self.update(self.views[domain][name])  # counted again when a search needs it

    def count(self, domain: str, need: int | None = None) -> None:
        """Count ``domain``'s workers, least loaded first, until they hold ``need`` members
        (None: every one of them)."""
        views = self.views.get(domain, {})
        queue = self.pending.get(domain)
        if queue is None:
            queue = self.pending[domain] = sorted(views, key=lambda n: candidate_key(views[n]), reverse=True)
            self.uncounted.update(queue)
        while queue and (need is None or self.totals[domain] < need):
            name = queue.pop()
            if name in self.uncounted and name in views:
                self.uncounted.discard(name)
                self._count(domain, views[name])

    def count_all(self) -> None:
        for domain in self.views:
            self.count(domain)

    def held(self, domain: str) -> int:
        """How many members ``domain``'s workers hold (counted now if they were not)."""
        self.count(domain)
        return self.totals.get(domain, 0)

    def workers_in(self, domain: str) -> int:
        return len(self.views.get(domain, {}))

    def best(self, size: int) -> tuple[str, list[Seat]] | None:
        """The domain to place ``size`` members in and its seats in rank order, or None:
        the fewest ``prefer`` values, then the tightest bound (best fit), then the name."""
        chosen = None
        for room, domain in sorted((room, domain) for domain, room in self.bounds.items() if room >= size):
            self.count(domain, size)
            if self.totals[domain] < size:
                continue
            spans = 1 if self.prefer is None else len(_fewest(self.seats[domain].values(), size))
            if spans > 1:  # one value is the least there is; more may be fewer once all are counted
                self.count(domain)
                spans = len(_fewest(self.seats[domain].values(), size))
            if chosen is None or (spans, room, domain) < chosen:
                chosen = (spans, room, domain)
            if spans == 1:
                break
        return None if chosen is None else (chosen[2], self.seats_in(chosen[2], size))

    def seats_in(self, domain: str, size: int) -> list[Seat]:
        """``domain``'s seats in rank order for ``size`` members: the fewest ``prefer`` groups
        that hold them (largest first), in each the workers that hold most, then least loaded."""
        seats = self.seats.get(domain, {}).values()
        order = {group: i for i, group in enumerate(_fewest(seats, size))}
        chosen = [seat for seat in seats if seat.group in order]
        return sorted(chosen, key=lambda s: (order[s.group], -len(s.allotments), candidate_key(s.view)))


def _fewest(seats: Iterable[Seat], size: int) -> list[str | None]:
    """The fewest ``prefer`` values whose seats hold ``size`` members (or all of them, when
    they hold fewer): the largest groups first is what minimises the count."""
    held: Counter[str | None] = Counter()
    for seat in seats:
        held[seat.group] += len(seat.allotments)
    chosen, count = [], 0
    for group in sorted(held, key=lambda g: (-held[g], g is None, g or "")):
        if count >= size:
            break
        chosen.append(group)
        count += held[group]
    return chosen


def seat_members(
    execution_id: str, gang: Gang, domain: str, seats: list[Seat], count: int | None = None
) -> GangPlacement:
    """Ranks over ``seats`` in order, each worker filled before the next, ``gang.size`` in all
    (``count``: fewer, the room a waiting gang holds)."""
    count = gang.size if count is None else count
    members: list[Member] = []
    groups = set()
    for seat in seats:
        if len(members) == count:
            break
        groups.add(seat.group)
        for allotment in seat.allotments[: count - len(members)]:
            members.append(Member(len(members), seat.view.name, allotment))
    where = f"{gang.topology} {domain}"
    if gang.prefer is not None:
        where += f" ({len(groups)} {gang.prefer} value{'s' if len(groups) != 1 else ''})"
    workers = len({m.worker for m in members})
    reason = f"gang of {gang.size} on {workers} worker{'s' if workers != 1 else ''} in {where}"
    return GangPlacement(execution_id, domain, tuple(members), reason)


def place_gang(gd: GangDemand, workers: Iterable[WorkerView], namespace: str | None = None) -> GangPlacement | Board:
    """Where ``gd``'s members go, or the ``Board`` that says why they fit nowhere now
    (``flux.scheduling.gang_explain`` words it). ``namespace``: the gang's, when some
    worker is restricted to namespaces. Nothing is changed: ``claim`` books a placement."""
    board = Board(Fit(gd.demand, gd.gang, namespace), gd.gang, workers)
    found = board.best(gd.gang.size)
    if found is None:
        board.count_all()
        return board
    return seat_members(gd.execution_id, gd.gang, *found)


def claim(placement: GangPlacement, views: dict[str, WorkerView], filters: Iterable[Filter]) -> list[WorkerView]:
    """Book every member on its worker's view (within one round, as ``place`` books a
    single execution): ``filters`` are the gang's (``Fit.filters``). The views changed."""
    filters = tuple(filters)
    changed: dict[str, WorkerView] = {}
    for member in placement.members:
        view = views[member.worker]
        take(filters, view, member.allotment)
        view.running += 1
        changed[view.name] = view
    return list(changed.values())
