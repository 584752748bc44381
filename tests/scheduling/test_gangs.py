"""Gang placement (issue 53, docs/gangs.md): all or nothing on one topology domain, checked
as properties against an arithmetic oracle that brute-forces every count of members per
worker on small fleets, and on a few hand-made fleets."""

from __future__ import annotations

from collections import Counter

from gang_cases import best_spread, fleets, fresh, gangs, holds
from hypothesis import given, settings

from flux.domain.gang import Gang
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.demand import Demand
from flux.scheduling.gangs import Board, Fit, GangDemand, GangPlacement, claim, place_gang
from flux.scheduling.snapshot import GPU, WorkerView

GiB = 1024**3


def _check_fits(placement: GangPlacement, fleet: list[WorkerView], gd: GangDemand) -> None:
    """Every member's allotment fits its worker, the members of one worker together."""
    views = {w.name: w for w in fleet}
    per_worker = Counter(m.worker for m in placement.members)
    for name, count in per_worker.items():
        worker = views[name]
        assert count <= gd.gang.per_worker
        assert count <= worker.free_slots
        allotments = [m.allotment for m in placement.members if m.worker == name]
        held = Resources()
        for allotment in allotments:
            held = held + allotment.resources
        for dimension, amount in held.items():
            assert amount <= worker.available.get(dimension, 0) + 1e-9
        cards = [index for allotment in allotments for index in allotment.gpus]
        assert len(cards) == len(set(cards)), "members never share a card"
        assert not any(worker.gpu_allotted.get(index) for index in cards), "nor take a card already allotted"
        request = gd.demand.request
        if request is not None and request.gpu is not None:
            assert all(len(allotment.gpus) == request.gpu for allotment in allotments)


@settings(max_examples=300, deadline=None)
@given(fleet=fleets(), gd=gangs())
def test_all_or_nothing_on_one_domain_and_found_whenever_one_exists(fleet, gd):
    before = fresh(fleet)
    found = place_gang(gd, fleet)
    fewest = best_spread(fleet, gd)
    assert repr(fleet) == repr(before), "placing changes nothing: claim books it"
    if fewest is None:
        assert isinstance(found, Board), "no placement exists, none is made"
        return
    assert isinstance(found, GangPlacement), "a placement exists: it is found"
    assert [m.rank for m in found.members] == list(range(gd.gang.size)), "never a partial gang"
    domains = {next(w for w in fleet if w.name == m.worker).labels["rack"] for m in found.members}
    assert domains == {found.domain}, "all members share one topology value"
    _check_fits(found, fleet, gd)
    if gd.gang.prefer is not None:
        spread = {next(w for w in fleet if w.name == m.worker).labels.get("zone") for m in found.members}
        assert len(spread) == fewest, "prefer: as few zones as any placement spans"


@settings(max_examples=150, deadline=None)
@given(fleet=fleets(), gd=gangs())
def test_a_board_counts_what_each_domain_holds(fleet, gd):
    found = place_gang(gd, fleet)
    board = found if isinstance(found, Board) else Board(_fit(gd), gd.gang, fleet)
    for rack in {w.labels["rack"] for w in fleet if "rack" in w.labels}:
        expected = sum(holds(w, gd) for w in fleet if w.labels.get("rack") == rack)
        assert board.held(rack) == expected
    assert board.unlabelled == {w.name for w in fleet if "rack" not in w.labels}


def _fit(gd: GangDemand) -> Fit:
    return Fit(gd.demand, gd.gang)


@settings(max_examples=100, deadline=None)
@given(fleet=fleets(), gd=gangs())
def test_a_claimed_gang_is_booked_on_its_workers(fleet, gd):
    found = place_gang(gd, fleet)
    if not isinstance(found, GangPlacement):
        return
    views = {w.name: w for w in fleet}
    running = {w.name: w.running for w in fleet}
    claim(found, views, _fit(gd).filters)
    for name, count in Counter(m.worker for m in found.members).items():
        assert views[name].running == running[name] + count
    again = place_gang(gd, fleet)  # what it took is not offered twice
    if isinstance(again, GangPlacement):
        _check_fits(again, fleet, gd)


def _worker(name: str, rack: str, free_cards: int, zone: str = "a", cards: int = 8) -> WorkerView:
    return WorkerView(
        name=name,
        labels={"rack": rack, "zone": zone},
        total=Resources(cpu=64.0),
        gpus=tuple(GPU(i, f"{name}-{i}", "H100", 80 * GiB, 80 * GiB) for i in range(cards)),
        gpu_allotted={i: 1 for i in range(free_cards, cards)},
        max_concurrent_executions=8,
        allocation="reserve",
    )


def test_eight_gpu_members_go_whole_to_one_rack_with_rank_zero_first():
    fleet = [_worker("a1", "r1", 8), _worker("a2", "r1", 4), _worker("b1", "r2", 8), _worker("b2", "r2", 8)]
    gd = GangDemand(Demand("g", ResourceRequest(gpu=8, cpu=32), None), Gang(size=2, topology="rack"))
    placement = place_gang(gd, fleet)
    assert isinstance(placement, GangPlacement)
    assert placement.domain == "r2" and placement.workers == ("b1", "b2")
    assert [m.allotment.gpus for m in placement.members] == [tuple(range(8))] * 2
    assert placement.reason == "gang of 2 on 2 workers in rack r2"


def test_per_worker_packs_members_onto_few_workers():
    fleet = [_worker("a1", "r1", 8), _worker("a2", "r1", 8), _worker("a3", "r1", 3)]
    gd = GangDemand(Demand("g", ResourceRequest(gpu=1), None), Gang(size=10, topology="rack", per_worker=8))
    placement = place_gang(gd, fleet)
    assert isinstance(placement, GangPlacement)
    assert Counter(m.worker for m in placement.members) == {"a1": 8, "a2": 2}
    assert [m.allotment.gpus for m in placement.members[:8]] == [(i,) for i in range(8)]


def test_prefer_packs_into_the_fewest_zones_and_best_fit_keeps_big_racks_whole():
    fleet = [
        _worker("a1", "r1", 8, zone="x"),
        _worker("a2", "r1", 8, zone="y"),
        _worker("a3", "r1", 8, zone="y"),
        _worker("b1", "r2", 8, zone="x"),
        _worker("b2", "r2", 8, zone="y"),
        _worker("c1", "r3", 8, zone="x"),
        _worker("c2", "r3", 8, zone="x"),
        _worker("c3", "r3", 8, zone="x"),
        _worker("c4", "r3", 8, zone="x"),
    ]
    request = ResourceRequest(gpu=8)
    two = place_gang(GangDemand(Demand("g", request, None), Gang(size=2, topology="rack", prefer="zone")), fleet)
    assert two.domain == "r1" and set(two.workers) == {"a2", "a3"}, "one zone beats the smaller rack's two"
    three = place_gang(GangDemand(Demand("g", request, None), Gang(size=3, topology="rack")), fleet)
    assert three.domain == "r1", "the rack closest to the gang's size"


def test_unconstrained_members_still_need_a_slot_each_and_the_label():
    fleet = [
        WorkerView(name="w1", labels={"rack": "r1"}, max_concurrent_executions=2),
        WorkerView(name="w2", labels={"rack": "r1"}, max_concurrent_executions=1, running=1),
        WorkerView(name="w3", labels={}, max_concurrent_executions=4),
    ]
    gd = GangDemand(Demand("g", None, None), Gang(size=2, topology="rack", per_worker=2))
    assert place_gang(gd, fleet).workers == ("w1",)
    board = place_gang(GangDemand(Demand("g", None, None), Gang(size=3, topology="rack", per_worker=3)), fleet)
    assert isinstance(board, Board) and board.totals["r1"] == 2 and board.unlabelled == {"w3"}
