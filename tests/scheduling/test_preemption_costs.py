"""Victims by cost and withdrawn preemptions (docs/contention.md), as properties over
random workers full of lower-priority executions, and worked examples: the victims free
enough room and no more, the cheapest to lose go (least work since a checkpoint), what
``min_runtime`` or the cooldown protects goes only when nothing else would do, and a
preemption no room needs is called off."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.allotment import Allotment
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.allocation import with_allotments
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.filters import active, bound
from flux.scheduling.holders import Holder
from flux.scheduling.placement import place
from flux.scheduling.pool import FreePool
from flux.scheduling.preemption import Costs, find_room, fits, room_view, victims_of, withdrawals
from flux.scheduling.snapshot import WorkerView

NOW, COOLDOWN = 10_000.0, 300.0
COSTS = Costs(NOW, COOLDOWN)


def _worker(holders: list[Holder], accel: int, name: str = "w0") -> WorkerView:
    view = WorkerView(
        name=name,
        labels={},
        total=Resources(accel=accel),
        max_concurrent_executions=len(holders) + 2,
        allocation="reserve",
    )
    mine = [h.allotment for h in holders if h.worker == name]
    return with_allotments(view.evolve(running=len(mine)), mine)


def _checks(demand: Demand) -> tuple:
    return bound(active(demand.request, demand.affinity), demand.request, demand.affinity)


@st.composite
def full_workers(draw):
    """One worker whose accel is all held by lower-priority executions of random costs, and
    a waiting execution that needs some of it back."""
    holders = []
    for i in range(draw(st.integers(1, 8))):
        claimed = NOW - draw(st.integers(1, 3000))
        holders.append(
            Holder(
                f"h{i}",
                "w0",
                priority=draw(st.sampled_from((-100, 0))),
                allotment=Allotment(Resources(accel=draw(st.sampled_from((1, 1, 2))))),
                claimed_at=claimed,
                progress_at=draw(st.one_of(st.just(0.0), st.floats(claimed, NOW))),
                min_runtime=draw(st.sampled_from((0.0, 0.0, 600.0))),
                preempted_at=draw(st.sampled_from((None, None, NOW - 60, NOW - 3600))),
            )
        )
    accel = sum(h.allotment.quantities["accel"] for h in holders)
    demand = Demand("p", ResourceRequest(resources={"accel": draw(st.integers(1, accel))}), None, priority=100)
    return _worker(holders, accel), holders, demand


def _protected(holder: Holder) -> bool:
    return COSTS.cooling(holder) or COSTS.young(holder)


@settings(max_examples=200, deadline=None)
@given(full_workers())
def test_victims_free_enough_room_and_every_one_is_needed(case):
    worker, holders, demand = case
    room = find_room(_checks(demand), worker, holders, (), lambda h: True, costs=COSTS)
    assert room is not None
    gone = {v.execution_id for v in room.victims}
    staying = [h.allotment for h in holders if h.execution_id not in gone]
    assert fits(_checks(demand), room_view(worker, staying))
    for victim in room.victims:
        assert not fits(_checks(demand), room_view(worker, [*staying, victim.allotment])), victim


@settings(max_examples=200, deadline=None)
@given(full_workers())
def test_of_two_alike_the_one_that_loses_less_work_goes_and_protection_comes_first(case):
    worker, holders, demand = case
    room = find_room(_checks(demand), worker, holders, (), lambda h: True, costs=COSTS)
    gone = {v.execution_id for v in room.victims}
    kept = [h for h in holders if h.execution_id not in gone]
    for victim in room.victims:
        for stays in kept:
            if stays.allotment != victim.allotment:
                continue  # a different size may stay where this one cannot (the reprieve)
            key = COSTS.keep_order
            # the one that stays is at least as costly to lose: given back before the victim
            assert key(stays) <= key(victim), (stays, victim)
            if _protected(victim) and stays.priority == victim.priority:
                assert _protected(stays), (stays, victim)
            if not _protected(victim) and not _protected(stays) and stays.priority == victim.priority:
                assert COSTS.lost(stays) >= COSTS.lost(victim), (stays, victim)


@settings(max_examples=200, deadline=None)
@given(full_workers())
def test_a_protected_execution_is_chosen_only_when_the_unprotected_cannot_free_the_room(case):
    worker, holders, demand = case
    room = find_room(_checks(demand), worker, holders, (), lambda h: True, costs=COSTS)
    if any(_protected(v) for v in room.victims):
        others = [h for h in holders if not _protected(h)]
        staying = [h.allotment for h in holders if _protected(h)]
        # even every unprotected one leaving (the protected staying) would not have made room
        assert not fits(_checks(demand), room_view(worker, staying)) or not others


def test_the_least_work_since_a_checkpoint_goes_not_the_youngest_attempt():
    older = Holder("older", "w0", allotment=Allotment(Resources(accel=1)), claimed_at=NOW - 900, progress_at=NOW - 5)
    younger = Holder("younger", "w0", allotment=Allotment(Resources(accel=1)), claimed_at=NOW - 100)
    demand = Demand("p", ResourceRequest(resources={"accel": 1}), None, priority=100)
    worker = _worker([older, younger], accel=2)
    room = find_room(_checks(demand), worker, [older, younger], (), lambda h: True, costs=COSTS)
    assert [v.execution_id for v in room.victims] == ["older"]
    assert COSTS.lost(older) == 5 and COSTS.lost(younger) == 100


def test_min_runtime_then_the_cooldown_then_priority_order_the_victims():
    young = Holder("young", "w0", priority=-100, claimed_at=NOW - 10, min_runtime=600)
    cooling = Holder("cooling", "w0", priority=-100, claimed_at=NOW - 10, preempted_at=NOW - 30)
    plain = Holder("plain", "w0", priority=0, claimed_at=NOW - 2000)
    assert COSTS.key([plain]) < COSTS.key([young]) < COSTS.key([cooling])
    assert COSTS.young(young) and not COSTS.young(dataclasses.replace(young, claimed_at=NOW - 601))
    assert not COSTS.cooling(dataclasses.replace(cooling, preempted_at=NOW - COOLDOWN - 1))


def test_victims_of_is_generic_over_what_keeps_them():
    """The victims of any room (one worker, or several for a gang): ``keep`` says what may stay."""
    holders = [Holder(f"h{i}", f"w{i % 2}", claimed_at=NOW - 100 * i) for i in range(4)]
    budget = [2]

    def keep(holder: Holder) -> bool:
        if budget[0] == 0:
            return False
        budget[0] -= 1
        return True

    victims = victims_of(holders, keep, COSTS)
    # the two that lose the most work stay; the two that lose least go
    assert {v.execution_id for v in victims} == {"h0", "h1"}


def _pool(holders: list[Holder], accel: int) -> FreePool:
    return FreePool([_worker(holders, accel)])


def test_a_preemption_whose_preemptor_left_the_queue_is_withdrawn_and_one_still_needed_is_not():
    leaving = Holder("victim", "w0", leaving=True, preempted_by="p", allotment=Allotment(Resources(accel=1)))
    assert withdrawals([leaving], needed=set(), sought=set(), waiting=set()) == [
        leaving
    ]  # placed, cancelled, timed out
    assert withdrawals([leaving], needed={"victim"}, sought={"p"}, waiting=set()) == []  # a room waits for it
    assert withdrawals([leaving], needed=set(), sought=set(), waiting={"p"}) == []  # not reached this round
    assert withdrawals([leaving], needed=set(), sought={"p"}, waiting={"p"}) == [leaving]  # room held elsewhere


def test_a_preemptor_still_waiting_keeps_its_victims_and_one_whose_room_freed_up_gives_them_back():
    victim = Holder(
        "victim", "w0", priority=-100, leaving=True, preempted_by="p", allotment=Allotment(Resources(accel=1))
    )
    other = Holder("other", "w0", priority=-100, allotment=Allotment(Resources(accel=1)))
    demand = Demand("p", ResourceRequest(resources={"accel": 1}), None, priority=100)
    contention = Contention([victim, other], floor=-100, costs=COSTS)
    place([demand], _pool([victim, other], accel=2), contention)
    assert contention.preemptions == [] and contention.needed == {"victim"} and "p" in contention.sought
    # the other one ended meanwhile: the room is there without the victim leaving
    contention = Contention([victim], floor=-100, costs=COSTS)
    placed = place([demand], _pool([victim], accel=2), contention)
    assert [p.execution_id for p in placed] == ["p"] and contention.needed == set()
    assert withdrawals([victim], contention.needed, contention.sought, waiting=set()) == [victim]
