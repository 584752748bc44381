"""Preemption as properties (docs/contention.md): over random workers and the executions
they hold, the victims ``find_room`` and ``Contention.make_room`` choose are lower-priority,
preemptible and not already leaving; once they leave the waiting execution fits; the set
is minimal; the youngest of equal priority go first; and nothing at or below the floor
makes room at all."""

from __future__ import annotations

import dataclasses

from contention_cases import REQUESTS, demands, fresh, seeded, workers
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.allotment import Allotment
from flux.domain.quotas import Quota
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.allocation import with_allotments
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.filters import active, bound
from flux.scheduling.holders import Holder
from flux.scheduling.placement import place
from flux.scheduling.pool import FreePool
from flux.scheduling.preemption import Room, find_room, fits, room_view
from flux.scheduling.quotas import QuotaLedger
from flux.scheduling.snapshot import WorkerView

LOW, PRIORITIES = -100, (-100, -50, 0)
#: Waiting executions that need several to leave.
BIG = (ResourceRequest(resources={"accel": 4}), ResourceRequest(cpu=4, memory="4Gi"), ResourceRequest(cpu=8))


def _checks(demand: Demand) -> tuple:
    return bound(active(demand.request, demand.affinity), demand.request, demand.affinity)


@st.composite
def held_fleets(draw, max_workers: int = 3):
    """A reserve fleet whose workers hold lower-priority executions, some not preemptible,
    some already leaving, and a waiting execution of a higher priority."""
    fleet = draw(workers(max_workers=max_workers, reserve_only=True))
    seeds = draw(demands("h", draw(st.integers(2, 16)), priorities=PRIORITIES))  # enough to fill most fleets
    steadfast = draw(st.sets(st.sampled_from([d.execution_id for d in seeds]))) if seeds else set()
    holders = seeded(fleet, seeds, preemptible=lambda d: d.execution_id not in steadfast)
    gone = draw(st.sets(st.sampled_from([h.execution_id for h in holders]))) if holders else set()
    holders = [dataclasses.replace(h, leaving=h.execution_id in gone) for h in holders]
    priority = draw(st.sampled_from((-50, 0, 0, 100)))
    request = draw(st.sampled_from((*REQUESTS, *BIG)))
    waiting = Demand("p", request, None, priority=priority, scheduled_at=100.0)
    return fleet, holders, waiting


@st.composite
def crowded(draw, max_workers: int = 3):
    """Reserve workers full of small lower-priority executions (several must leave for a big one)."""
    fleet, holders, n = [], [], 0
    for i in range(draw(st.integers(1, max_workers))):
        accel = draw(st.integers(1, 6))
        sizes, left = [], accel
        while left > 0:
            sizes.append(min(left, draw(st.sampled_from((1, 1, 2)))))
            left -= sizes[-1]
        for size in sizes:
            holders.append(
                Holder(
                    f"h{n}",
                    f"w{i}",
                    priority=draw(st.sampled_from(PRIORITIES)),
                    preemptible=draw(st.sampled_from((True, True, False))),
                    allotment=Allotment(Resources(accel=size, cpu=1)),
                    claimed_at=float(draw(st.integers(0, 5))),
                    leaving=draw(st.sampled_from((False, False, False, True))),
                )
            )
            n += 1
        view = WorkerView(
            name=f"w{i}",
            labels={},
            total=Resources(cpu=float(len(sizes) + 1), accel=accel),
            registered_seq=i,
            max_concurrent_executions=len(sizes) + draw(st.integers(0, 1)),
            allocation="reserve",
        )
        fleet.append(
            with_allotments(view.evolve(running=len(sizes)), [h.allotment for h in holders if h.worker == view.name])
        )
    request = ResourceRequest(resources={"accel": draw(st.integers(1, 6))}, cpu=draw(st.sampled_from((None, 1, 2))))
    waiting = Demand("p", request, None, priority=draw(st.sampled_from((-50, 0, 100))), scheduled_at=100.0)
    return fleet, holders, waiting


def cases(max_workers: int):
    return held_fleets(max_workers=max_workers) | crowded(max_workers=max_workers)


def _evictable(demand: Demand):
    return lambda h: h.preemptible and h.priority < demand.priority


def _staying(holders: list[Holder], victims) -> list:
    gone = {v.execution_id for v in victims}
    return [h.allotment for h in holders if not h.leaving and h.execution_id not in gone]


def _assert_sound(room, holders: list[Holder], demand: Demand) -> None:
    """Victims may be evicted, room is made by their leaving, and every one of them is needed."""
    checks = _checks(demand)
    ids = {h.execution_id for h in holders}
    for v in room.victims:
        assert v.execution_id in ids
        assert v.priority < demand.priority and v.preemptible and not v.leaving, v
    staying = _staying(holders, room.victims)
    assert fits(checks, room_view(room.worker, staying))
    for v in room.victims:  # minimal: giving any single victim back leaves no room
        assert not fits(checks, room_view(room.worker, [*staying, v.allotment])), v


def _assert_youngest_and_lowest_first(room, holders: list[Holder], demand: Demand) -> None:
    """A victim is never older, nor of a higher priority, than an evictable execution of the same
    size that stays (with different sizes a smaller, younger one may stay: Kubernetes' reprieve)."""
    victims = {v.execution_id for v in room.victims}
    kept = [h for h in holders if _evictable(demand)(h) and not h.leaving and h.execution_id not in victims]
    for v in room.victims:
        for k in kept:
            if k.allotment == v.allotment:
                assert k.priority > v.priority or (k.priority == v.priority and k.claimed_at <= v.claimed_at), (v, k)


@settings(max_examples=150, deadline=None)
@given(cases(max_workers=1))
def test_find_room_chooses_evictable_victims_whose_leaving_makes_room_and_no_more(case):
    fleet, holders, demand = case
    worker, checks = fleet[0], _checks(demand)
    room = find_room(checks, worker, holders, (), _evictable(demand))
    if room is None:  # not even every evictable one leaving would make room
        fixed = [h.allotment for h in holders if not h.leaving and not _evictable(demand)(h)]
        assert not fits(checks, room_view(worker, fixed))
        return
    assert room.worker is worker
    assert {h.execution_id for h in room.leaving} == {h.execution_id for h in holders if h.leaving}
    _assert_sound(room, holders, demand)
    _assert_youngest_and_lowest_first(room, holders, demand)


def best_room(rooms):
    """The room the round takes among these (``Contention`` keeps them in a heap on ``Room.key``)."""
    found = [room for room in rooms if room is not None]
    return min(found, key=Room.key) if found else None


@settings(max_examples=100, deadline=None)
@given(cases(max_workers=3))
def test_best_room_picks_the_worker_whose_victims_matter_least(case):
    fleet, holders, demand = case
    rooms = [
        find_room(_checks(demand), w, [h for h in holders if h.worker == w.name], (), _evictable(demand)) for w in fleet
    ]
    chosen = best_room(rooms)
    found = [r for r in rooms if r is not None]
    assert (chosen is None) == (not found)
    if chosen is not None:  # the worker whose most important victim is least important (none at all best)

        def most(room):
            return max((v.priority for v in room.victims), default=None)

        if any(not r.victims for r in found):
            assert not chosen.victims
        else:
            assert most(chosen) == min(most(r) for r in found)


def _make_room(fleet, holders, queue, floor: int) -> Contention:
    contention = Contention(holders, floor=floor)
    place(queue, fleet, contention)
    return contention


@settings(max_examples=100, deadline=None)
@given(cases(max_workers=3), st.integers(1, 4))
def test_make_room_preempts_sound_minimal_sets_and_never_the_same_victim_twice(case, count):
    fleet, holders, demand = case
    before = {w.name: w for w in fresh(fleet)}
    queue = [dataclasses.replace(demand, execution_id=f"p{i}", scheduled_at=100.0 + i) for i in range(count)]
    contention = _make_room(fleet, holders, queue, floor=LOW)
    chosen = [v for p in contention.preemptions for v in p.victims]
    assert len(chosen) == len(set(chosen))
    by_id = {h.execution_id: h for h in holders}
    for p in contention.preemptions:
        for victim in p.victims:
            holder = by_id[victim]
            assert holder.worker == p.worker
            assert holder.priority < demand.priority and holder.preemptible and not holder.leaving
    if contention.preemptions and contention.preemptions[0].preemptor == "p0":
        # the first of the round is what find_room and best_room choose over the fleet as it was
        p = contention.preemptions[0]
        rooms = [
            find_room(_checks(demand), w, [h for h in holders if h.worker == w.name], (), _evictable(demand))
            for w in before.values()
            if any(h.worker == w.name for h in holders)
        ]
        room = best_room(rooms)
        assert room.worker.name == p.worker and {v.execution_id for v in room.victims} == set(p.victims)
        _assert_sound(room, [h for h in holders if h.worker == p.worker], demand)


@settings(max_examples=100, deadline=None)
@given(cases(max_workers=3), st.booleans())
def test_a_demand_at_or_below_the_floor_makes_no_room(case, at_floor):
    fleet, holders, demand = case
    floor = demand.priority if at_floor else demand.priority + 1
    contention = _make_room(fleet, holders, [demand], floor=floor)
    assert contention.preemptions == [] and contention.touched == set()
    assert demand.execution_id not in contention.waiting


@settings(max_examples=100, deadline=None)
@given(cases(max_workers=3))
def test_a_class_that_never_preempts_only_holds_room(case):
    fleet, holders, demand = case
    contention = _make_room(fleet, holders, [dataclasses.replace(demand, may_preempt=False)], floor=LOW)
    assert contention.preemptions == []
    reason = contention.waiting.get(demand.execution_id)
    assert reason is None or reason.phrase == "waiting for room"


@settings(max_examples=100, deadline=None)
@given(cases(max_workers=3))
def test_an_execution_that_is_not_preemptible_is_never_a_victim(case):
    fleet, holders, demand = case
    steadfast = [dataclasses.replace(h, preemptible=False) for h in holders]
    contention = _make_room(fleet, steadfast, [demand], floor=LOW)
    assert contention.preemptions == []


@settings(max_examples=60, deadline=None)
@given(cases(max_workers=3))
def test_an_execution_its_quota_refuses_preempts_nothing(case):
    fleet, holders, demand = case
    contention = Contention(holders, QuotaLedger({demand.namespace: Quota(executions=0)}, holders), floor=LOW)
    place([demand], fleet, contention)
    assert contention.preemptions == [] and contention.waiting[demand.execution_id].filter == "quota"


@settings(max_examples=150, deadline=None)
@given(cases(max_workers=3), st.data())
def test_room_is_made_only_on_a_worker_whose_labels_and_namespaces_admit_the_demand(case, data):
    """The searches for room check only what changes; a worker's labels and the namespaces
    it serves are judged apart, and a room is never held, nor a victim chosen, elsewhere."""
    fleet, holders, demand = case
    fleet = [
        w.evolve(
            labels={"zone": data.draw(st.sampled_from(("a", "b")))},
            namespaces=data.draw(st.sampled_from((None, frozenset({"ml"}), frozenset({"data", "ml"})))),
        )
        for w in fleet
    ]
    demand = dataclasses.replace(demand, affinity={"zone": "a"}, namespace=data.draw(st.sampled_from(("ml", "data"))))
    contention = Contention(holders, floor=LOW)
    place([demand], FreePool(fleet), contention)
    admits = {
        w.name for w in fleet if w.labels["zone"] == "a" and (w.namespaces is None or demand.namespace in w.namespaces)
    }
    assert {p.worker for p in contention.preemptions} <= admits
    assert contention.touched <= admits
