"""Victims for a gang (issue 53, docs/gangs.md) as properties: over random racks of workers
holding lower-priority work (some of it running gangs), the victims ``gang_room`` chooses
may be evicted, free enough room that every member then fits in the room's domain, take a
gang victim whole, and none is needless; when it finds none, not even evicting everything
evictable would do."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.allotment import Allotment
from flux.domain.gang import Gang
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.allocation import with_allotments
from flux.scheduling.demand import Demand
from flux.scheduling.gang_victims import gang_room
from flux.scheduling.gangs import Board, Fit, GangDemand, GangPlacement, place_gang
from flux.scheduling.holders import Holder
from flux.scheduling.preemption import Costs
from flux.scheduling.snapshot import WorkerView

PRIORITY = 50


def _view(name: str, rack: str, accel: int, slots: int, holders: list[Holder]) -> WorkerView:
    view = WorkerView(
        name=name,
        labels={"rack": rack},
        total=Resources(accel=accel),
        max_concurrent_executions=slots,
        running=len(holders),
        allocation="reserve",
    )
    return with_allotments(view, [h.allotment for h in holders])


@st.composite
def crowded(draw):
    """Racks of workers full of lower-priority work; some holders belong to a running gang."""
    holders: dict[str, list[Holder]] = {}
    specs, n = [], 0
    for i in range(draw(st.integers(2, 5))):
        name, accel, slots = f"w{i}", draw(st.sampled_from((2, 4))), draw(st.integers(2, 4))
        holders[name], left = [], accel
        while left and len(holders[name]) < slots and draw(st.integers(0, 3)):
            amount = draw(st.integers(1, left))
            left -= amount
            priority = draw(st.sampled_from((-100, 0, 100)))
            preemptible = draw(st.integers(0, 5)) > 0
            holders[name].append(
                Holder(
                    f"h{n}",
                    name,
                    priority=priority,
                    preemptible=preemptible,
                    allotment=Allotment(Resources(accel=amount)),
                    claimed_at=float(n),
                )
            )
            n += 1
        specs.append((name, draw(st.sampled_from(("r1", "r2"))), accel, slots))
    everyone = [h for hs in holders.values() for h in hs]
    gang_of = {}
    if len(everyone) >= 2 and draw(st.booleans()):  # two of them are the members of one running gang
        first, second = draw(st.sampled_from(everyone)), draw(st.sampled_from(everyone))
        if first.execution_id != second.execution_id:
            gang_of = {first.execution_id: "G", second.execution_id: "G"}
    size = draw(st.integers(2, 3))
    gang = Gang(size=size, topology="rack", per_worker=draw(st.integers(1, size)))
    gd = GangDemand(
        Demand("g", ResourceRequest(resources={"accel": draw(st.integers(1, 2))}), None, priority=PRIORITY), gang
    )
    return specs, holders, gang_of, gd


def _evictable(holder: Holder) -> bool:
    return holder.preemptible and holder.priority < PRIORITY


def _fleet(specs, holders: dict[str, list[Holder]], gone: set[str]) -> list[WorkerView]:
    return [
        _view(name, rack, accel, slots, [h for h in holders[name] if h.execution_id not in gone])
        for name, rack, accel, slots in specs
    ]


def _held(gd: GangDemand, fleet: list[WorkerView], domain: str) -> int:
    return Board(Fit(gd.demand, gd.gang), gd.gang, fleet).held(domain)


@settings(max_examples=300, deadline=None)
@given(case=crowded())
def test_victims_make_room_whole_and_none_is_needless(case):
    specs, holders, gang_of, gd = case
    fleet = _fleet(specs, holders, set())
    room = gang_room(gd, fleet, holders, _evictable, gang_of=gang_of)
    if room is None:
        units = {}
        for h in (h for hs in holders.values() for h in hs):
            units.setdefault(gang_of.get(h.execution_id, h.execution_id), []).append(h)
        everything = {h.execution_id for u in units.values() if all(map(_evictable, u)) for h in u}
        assert not isinstance(place_gang(gd, _fleet(specs, holders, everything)), GangPlacement)
        return
    gone = {v.execution_id for v in room.victims}
    assert all(_evictable(v) for v in room.victims)
    for unit in set(gang_of.values()):
        members = {e for e, g in gang_of.items() if g == unit}
        assert members <= gone or not members & gone, "a gang victim is taken whole"
    assert _held(gd, _fleet(specs, holders, gone), room.domain) >= gd.gang.size, "the victims free enough"
    for victim in room.victims:
        unit = gang_of.get(victim.execution_id)
        back = {e for e, g in gang_of.items() if g == unit} if unit else {victim.execution_id}
        assert _held(gd, _fleet(specs, holders, gone - back), room.domain) < gd.gang.size, "none is needless"


def test_the_least_important_victims_across_two_workers():
    holders = {
        "a1": [Holder("low", "a1", priority=-100, allotment=Allotment(Resources(accel=4)), claimed_at=1.0)],
        "a2": [Holder("mid", "a2", priority=0, allotment=Allotment(Resources(accel=4)), claimed_at=2.0)],
        "a3": [
            Holder("low2", "a3", priority=-100, allotment=Allotment(Resources(accel=2)), claimed_at=3.0),
            Holder("low3", "a3", priority=-100, allotment=Allotment(Resources(accel=2)), claimed_at=4.0),
        ],
    }
    fleet = [_view(name, "r1", 4, 4, hs) for name, hs in holders.items()]
    gd = GangDemand(
        Demand("g", ResourceRequest(resources={"accel": 4}), None, priority=PRIORITY), Gang(size=2, topology="rack")
    )
    room = gang_room(gd, fleet, holders, _evictable)
    assert room is not None and room.domain == "r1"
    assert sorted(v.execution_id for v in room.victims) == ["low", "low2", "low3"], "never the priority-0 one"


def test_a_gang_victim_is_taken_whole_and_weighed_as_all_its_members():
    def case(single: int):
        holders = {
            "a1": [Holder("m0", "a1", priority=-100, allotment=Allotment(Resources(accel=4)), claimed_at=1.0)],
            "a2": [Holder("m1", "a2", priority=-100, allotment=Allotment(Resources(accel=4)), claimed_at=1.0)],
            "b1": [Holder("s", "b1", priority=single, allotment=Allotment(Resources(accel=4)), claimed_at=2.0)],
        }
        fleet = [
            _view("a1", "r1", 4, 4, holders["a1"]),
            _view("a2", "r1", 4, 4, holders["a2"]),
            _view("b1", "r2", 4, 4, holders["b1"]),
            _view("b2", "r2", 4, 4, []),
        ]
        gd = GangDemand(
            Demand("g", ResourceRequest(resources={"accel": 4}), None, priority=PRIORITY), Gang(size=2, topology="rack")
        )
        room = gang_room(gd, fleet, holders, _evictable, gang_of={"m0": "G", "m1": "G"})
        return room.domain, sorted(v.execution_id for v in room.victims)

    assert case(single=-100) == ("r2", ["s"]), "of equal priority, one single beats a gang of two"
    assert case(single=0) == ("r1", ["m0", "m1"]), "the least important first: the gang, whole"


def test_victims_cost_as_issue_52_counts_them():
    """A victim within its min_runtime is taken only when nothing else would do, however
    unimportant: the same ``Costs`` rank victims for a gang as for one execution."""
    now = 1000.0
    holders = {
        "a1": [
            Holder(
                "young",
                "a1",
                priority=-100,
                allotment=Allotment(Resources(accel=4)),
                claimed_at=990.0,
                min_runtime=60.0,
            )
        ],
        "a2": [Holder("old", "a2", priority=0, allotment=Allotment(Resources(accel=4)), claimed_at=100.0)],
        "a3": [],
    }
    fleet = [_view(name, "r1", 4, 4, hs) for name, hs in holders.items()]
    gd = GangDemand(
        Demand("g", ResourceRequest(resources={"accel": 4}), None, priority=PRIORITY), Gang(size=2, topology="rack")
    )
    room = gang_room(gd, fleet, holders, _evictable, costs=Costs(now=now))
    assert [v.execution_id for v in room.victims] == ["old"]
    holders["a1"] = [dataclasses.replace(holders["a1"][0], min_runtime=0.0)]
    assert [v.execution_id for v in gang_room(gd, fleet, holders, _evictable, costs=Costs(now=now)).victims] == [
        "young"
    ], "past its min_runtime, the least important goes"
