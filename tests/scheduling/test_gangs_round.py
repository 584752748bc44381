"""A round's gangs (issue 53.2, 53.5): admission counts size x request, many gangs of one
kind never share a worker's room, a waiting gang holds the room it can against the work
behind it, two gangs that each could take half never deadlock, and a gang that may
preempt takes victims across a domain's workers."""

from __future__ import annotations

import dataclasses
from collections import Counter

from gang_cases import fleets, fresh, gangs
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.allotment import Allotment
from flux.domain.gang import Gang
from flux.domain.quotas import Quota
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.gang_admission import gang_quantities
from flux.scheduling.gang_explain import GangShortfall
from flux.scheduling.gang_round import GangRound
from flux.scheduling.gangs import GangDemand
from flux.scheduling.holders import Holder
from flux.scheduling.placement import place
from flux.scheduling.pool import FreePool
from flux.scheduling.quotas import QuotaLedger
from flux.scheduling.snapshot import GPU, WorkerView

GiB = 1024**3
GPU8 = ResourceRequest(gpu=8, cpu=32)


def _worker(name: str, rack: str, busy: bool = False) -> WorkerView:
    return WorkerView(
        name=name,
        labels={"rack": rack},
        total=Resources(cpu=64.0),
        gpus=tuple(GPU(i, f"{name}-{i}", "H100", 80 * GiB, 80 * GiB) for i in range(8)),
        gpu_allotted={i: 1 for i in range(8)} if busy else {},
        max_concurrent_executions=2,
        running=1 if busy else 0,
        allocation="reserve",
    )


def _gang(name: str, size: int, namespace: str = "default", priority: int = 0, keys=()) -> GangDemand:
    demand = Demand(name, GPU8, None, namespace=namespace, priority=priority, keys=keys)
    return GangDemand(demand, Gang(size=size, topology="rack"))


def test_many_gangs_of_one_kind_never_share_room():
    pool = FreePool([_worker(f"w{i}", "r1" if i < 6 else "r2") for i in range(10)])
    gangs = GangRound(pool)
    placed = [gangs.place(_gang(f"g{i}", 2)) for i in range(6)]
    assert [p is not None for p in placed] == [True] * 5 + [False]
    taken = Counter(m.worker for p in placed if p for m in p.members)
    assert set(taken.values()) == {1} and len(taken) == 10
    assert isinstance(gangs.waiting["g5"], GangShortfall)
    assert len(gangs._boards) == 1, "one kind, one scan of the fleet"


def test_admission_counts_size_times_the_request():
    assert gang_quantities(_gang("g", 4)) == Resources(gpu=32, cpu=128.0)
    quotas = QuotaLedger({"ml": Quota(Resources(gpu=16))}, [])
    gangs = GangRound(FreePool([_worker(f"w{i}", "r1") for i in range(4)]), Contention(quotas=quotas))
    assert gangs.place(_gang("big", 4, "ml")) is None
    assert gangs.waiting["big"].message == (
        "held by namespace ml's quota: gpu 0/16 in use, this gang asks 32 more (4 members)"
    )
    assert gangs.place(_gang("fits", 2, "ml")) is not None
    assert quotas.held["ml"]["gpu"] == 16 and quotas.count["ml"] == 2, "each member counted as one execution"


def test_a_concurrency_key_takes_every_member():
    gangs = GangRound(FreePool([_worker(f"w{i}", "r1") for i in range(4)]), Contention())
    assert gangs.place(_gang("g", 4, keys=(("train", 3),))) is None
    assert gangs.waiting["g"].message == (
        "concurrency key 'train': 0 of 3 hold a worker; this gang needs 4 (more than the limit: it can never start)"
    )
    assert gangs.place(_gang("h", 2, keys=(("train", 3),))) is not None
    assert gangs.place(_gang("i", 2, keys=(("train", 3),))) is None, "2 hold, 2 more would pass the limit"


def test_a_waiting_gang_holds_its_room_against_the_work_behind_it():
    fleet = [_worker("a1", "r1"), _worker("a2", "r1"), _worker("a3", "r1", busy=True), _worker("a4", "r1", busy=True)]
    pool = FreePool(fleet)
    gangs = GangRound(pool)
    assert gangs.place(_gang("big", 4)) is None
    assert gangs.held["big"].workers == ("a1", "a2")
    assert gangs.waiting["big"].message.endswith("rack r1 has 2 that fit; 2 more must free up in r1")
    assert place([Demand("small", ResourceRequest(gpu=8), None)], pool) == [], "the held room is taken"


def test_two_gangs_that_each_could_take_half_never_deadlock():
    fleet = {name: _worker(name, "r1", busy=name in ("a3", "a4")) for name in ("a1", "a2", "a3", "a4")}
    order = [_gang("first", 4), _gang("second", 4)]
    started = []
    for _ in range(4):  # rounds; between them the running work ends
        gangs = GangRound(FreePool([w.evolve() for w in fleet.values()]))
        for gd in order:
            placement = gangs.place(gd)
            if placement is not None:
                assert len(placement.members) == 4, "never a partial gang"
                started.append(gd.execution_id)
        held = [name for name, hold in gangs.held.items() if hold.members]
        assert len(held) <= 1, "only the gang ahead holds what is free"
        fleet = {name: _worker(name, "r1") for name in fleet}  # what ran ends
        order = [gd for gd in order if gd.execution_id not in started]
    assert started == ["first", "second"]


def test_a_gang_that_may_preempt_takes_victims_across_the_domain():
    fleet = [_worker(f"a{i}", "r1", busy=i < 2) for i in range(3)]
    holders = [
        Holder(f"low{i}", f"a{i}", priority=-100, allotment=Allotment(Resources(cpu=8.0), gpus=tuple(range(8))))
        for i in range(2)
    ]
    contention = Contention(holders, floor=-100)
    gangs = GangRound(FreePool(fleet), contention)
    assert gangs.place(_gang("urgent", 3, priority=100)) is None
    assert sorted((p.worker, p.victims) for p in contention.preemptions) == [("a0", ("low0",)), ("a1", ("low1",))]
    assert all(h.leaving for hs in contention.by_worker.values() for h in hs)
    assert gangs.held["urgent"].workers == ("a2",)


@settings(max_examples=150, deadline=None)
@given(fleet=fleets(), queue=st.lists(gangs(), min_size=1, max_size=6))
def test_a_round_of_gangs_never_books_a_worker_twice(fleet, queue):
    """Whatever a round places and holds, every worker's members (placed or held) fit it
    together: the boards kept across the round's gangs never offer the same room twice
    (slots, cards and custom resources always; cpu on a reserving worker, as for singles)."""
    original = {w.name: w for w in fresh(fleet)}
    gangs_round = GangRound(FreePool(fleet))
    for i, gd in enumerate(queue):
        gangs_round.place(GangDemand(dataclasses.replace(gd.demand, execution_id=f"g{i}"), gd.gang))
    booked = [*gangs_round.placements, *gangs_round.held.values()]
    for placement in gangs_round.placements:
        assert len(placement.members) == placement_size(queue, placement), "never a partial gang"
    for name, worker in original.items():
        members = [m for p in booked for m in p.members if m.worker == name]
        assert len(members) <= worker.free_slots
        cards = [index for m in members for index in m.allotment.gpus]
        assert len(cards) == len(set(cards)) and not any(worker.gpu_allotted.get(i) for i in cards)
        for dimension in ("cpu", "accel") if worker.reserves else ("accel",):  # sampled cpu: the threshold model
            used = sum(m.allotment.resources.get(dimension, 0) for m in members)
            assert used <= worker.available.get(dimension, 0) + 1e-9


def placement_size(queue: list[GangDemand], placement) -> int:
    return queue[int(placement.execution_id[1:])].gang.size
