"""One round's contention, worked examples (docs/contention.md); the properties over random
fleets and queues are in test_contention_properties.py."""

from __future__ import annotations

from flux.domain.allotment import Allotment
from flux.domain.quotas import Quota
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.allocation import with_allotments
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.holders import Holder
from flux.scheduling.ordering import order
from flux.scheduling.placement import place
from flux.scheduling.pool import FreePool
from flux.scheduling.quotas import QuotaLedger
from flux.scheduling.snapshot import WorkerView

ACCEL = ResourceRequest(resources={"accel": 1})


def fleet(*holders: Holder, accel: int = 2, names=("w1",)) -> FreePool:
    views = []
    for name in names:
        view = WorkerView(
            name=name, labels={}, total=Resources(accel=accel), max_concurrent_executions=4, allocation="reserve"
        )
        mine = [h.allotment for h in holders if h.worker == name]
        views.append(with_allotments(view.evolve(running=len(mine)), mine))
    return FreePool(views)


def holder(i: int, priority: int, claimed_at: float = 0.0, worker: str = "w1", **fields) -> Holder:
    return Holder(
        f"r{i}", worker, priority=priority, allotment=Allotment(Resources(accel=1)), claimed_at=claimed_at, **fields
    )


def test_the_youngest_lowest_priority_attempt_is_the_victim_and_room_is_held_for_the_preemptor():
    holders = [holder(1, -100, claimed_at=10), holder(2, -100, claimed_at=20)]
    contention = Contention(holders, floor=-100)
    pool = fleet(*holders)
    high, low = Demand("h", ACCEL, None, priority=100), Demand("l", ACCEL, None, priority=-100)
    assert place([high, low], pool, contention) == []
    assert [(p.preemptor, p.worker, p.victims) for p in contention.preemptions] == [("h", "w1", ("r2",))]
    assert "preempting r2" in contention.waiting["h"].message
    assert contention.touched == {"w1"}


def test_victims_already_leaving_are_not_preempted_twice():
    holders = [holder(1, -100, leaving=True), holder(2, -100)]
    contention = Contention(holders, floor=-100)
    place([Demand("h", ACCEL, None, priority=100)], fleet(*holders), contention)
    assert contention.preemptions == []
    assert "until r1 end" in contention.waiting["h"].message


def test_a_class_that_never_preempts_waits_with_its_room_held():
    holders = [holder(1, -100), holder(2, -100)]
    contention = Contention(holders, floor=-100)
    pool = fleet(*holders)
    place(
        [Demand("h", ACCEL, None, priority=100, may_preempt=False), Demand("l", ACCEL, None, priority=-100)],
        pool,
        contention,
    )
    assert contention.preemptions == []
    assert (
        "room is held for it on worker w1 until r2 end" in contention.waiting["h"].message
    )  # the fewest that must end


def test_lower_priority_work_kept_off_a_held_room_is_told_so_first():
    """The low-priority runs fit nowhere because h's room is held on w1: their reason is
    that room (``binding``'s priority room), each with its own priority, not only the
    workers' tally; a run w1 could never take is not told of it."""
    holders = [holder(1, -100), holder(2, -100)]
    contention = Contention(holders, floor=-50)
    never = Demand("x", ResourceRequest(resources={"accel": 3}), None, priority=-100)
    place(
        [
            Demand("h", ACCEL, None, priority=100, may_preempt=False),
            Demand("m", ACCEL, None, priority=-50),
            Demand("l", ACCEL, None, priority=-100),
            never,
        ],
        fleet(*holders),
        contention,
    )
    said = contention.waiting["l"]
    assert said.filter == "preemption" and said.message == (
        "room on worker w1 is held for higher-priority h (priority 100; this one's -100): "
        "lower-priority work may not take it"
    )
    assert "(priority 100; this one's -50)" in contention.waiting["m"].message  # the same kind: its own numbers
    assert "x" not in contention.waiting


def test_non_preemptible_work_is_never_a_victim():
    holders = [holder(1, -100, preemptible=False), holder(2, -100, preemptible=False)]
    contention = Contention(holders, floor=-100)
    place([Demand("h", ACCEL, None, priority=100)], fleet(*holders), contention)
    assert contention.preemptions == []
    assert "room is held for it on worker w1" in contention.waiting["h"].message


def test_work_of_the_lowest_priority_holds_no_room():
    contention = Contention([holder(1, 0), holder(2, 0)], floor=0)
    place([Demand("a", ACCEL, None)], fleet(holder(1, 0), holder(2, 0)), contention)
    assert contention.waiting == {} and contention.preemptions == []


def test_a_quota_holds_back_what_would_exceed_it_within_one_round():
    quotas = QuotaLedger({"ml": Quota(Resources(accel=1))}, [])
    contention = Contention([], quotas)
    demands = [Demand(f"e{i}", ACCEL, None, namespace="ml") for i in range(3)]
    placed = place(demands, fleet(accel=8), contention)
    assert [p.execution_id for p in placed] == ["e0"]
    assert "held by namespace ml's quota: accel 1/1 in use, this asks 1 more" in contention.waiting["e1"].message


def test_a_concurrency_key_admits_its_limit_within_one_round():
    contention = Contention([Holder("r", "w1", keys=("customer:a",))])
    demands = [Demand(f"e{i}", None, None, keys=(("customer:a", 2),)) for i in range(3)]
    placed = place(demands, fleet(), contention)
    assert [p.execution_id for p in placed] == ["e0"]
    assert "held by concurrency key 'customer:a': at its limit, 2/2 hold a worker" in contention.waiting["e1"].message


def test_order_is_priority_then_submission():
    demands = [
        Demand("a", None, None, priority=0, scheduled_at=1),
        Demand("b", None, None, priority=5, scheduled_at=2),
        Demand("c", None, None, priority=0, scheduled_at=3),
    ]
    assert [d.execution_id for d in order(demands)] == ["b", "a", "c"]
