"""Queue order under contention, as properties (docs/contention.md): priority first, FIFO
within a namespace and priority, namespaces interleaved by weighted dominant share, and
a queue of one priority and one namespace placed exactly as before contention existed."""

from __future__ import annotations

from collections import Counter

import pytest
from contention_cases import NAMESPACES, REQUESTS, demands, fresh, seeded, workers
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand
from flux.scheduling.fairshare import FairShare, capacity_of, dominant_share, interleave
from flux.scheduling.holders import SLOTS, Holdings
from flux.scheduling.ordering import order
from flux.scheduling.placement import place
from flux.scheduling.snapshot import worker_view


def _fair(fleet, holders=(), weights=None) -> FairShare:
    capacity = capacity_of((w.total for w in fleet), sum(w.max_concurrent_executions for w in fleet))
    return FairShare(capacity, weights or {}, holders)


@st.composite
def queues(draw):
    fleet = draw(workers())
    seeds = draw(demands("h", draw(st.integers(0, 6))))
    holders = seeded(fleet, seeds)
    return fleet, holders, draw(demands("e", draw(st.integers(0, 30))))


@settings(max_examples=150, deadline=None)
@given(queues(), st.booleans())
def test_order_puts_higher_priority_first_and_keeps_fifo_within_a_namespace_and_priority(case, with_fair):
    fleet, holders, queue = case
    ordered = list(order(queue, _fair(fleet, holders) if with_fair else None))
    assert sorted(d.execution_id for d in ordered) == sorted(d.execution_id for d in queue)  # a permutation
    priorities = [d.priority for d in ordered]
    assert priorities == sorted(priorities, reverse=True)
    for namespace in NAMESPACES:
        for priority in {d.priority for d in queue}:

            def same(ds):
                return [d.execution_id for d in ds if d.namespace == namespace and d.priority == priority]

            assert same(ordered) == same(queue)


def _equal(namespaces: dict[str, int], request=None) -> list[Demand]:
    """Each namespace's demands (all alike), submitted round robin."""
    queue, n = [], 0
    for i in range(max(namespaces.values(), default=0)):
        for namespace, count in namespaces.items():
            if i < count:
                queue.append(Demand(f"{namespace}-{i}", request, None, namespace=namespace, scheduled_at=float(n)))
                n += 1
    return queue


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from(NAMESPACES), st.integers(1, 40), min_size=2), st.sampled_from(REQUESTS), st.data()
)
def test_interleave_with_equal_weights_lets_no_namespace_get_two_ahead(counts, request, data):
    fleet = data.draw(workers())
    queue = _equal(counts, request)
    if data.draw(st.booleans()):  # or submitted one namespace after the other
        queue = sorted(queue, key=lambda d: d.namespace)
    taken: Counter[str] = Counter()
    for d in interleave(queue, _fair(fleet)):
        taken[d.namespace] += 1
        waiting = [ns for ns in counts if taken[ns] < counts[ns]]  # still have work
        assert all(taken[a] <= taken[b] + 1 for a in counts for b in waiting), (taken, counts)
    assert taken == Counter(counts)


@settings(max_examples=50, deadline=None)
@given(st.integers(10, 60), st.sampled_from(REQUESTS), st.data())
def test_interleave_gives_a_namespace_of_weight_two_about_twice_as_much(count, request, data):
    fleet = data.draw(workers())
    queue = _equal({"heavy": 3 * count, "light": 3 * count}, request)
    taken: Counter[str] = Counter()
    for d in interleave(queue, _fair(fleet, weights={"heavy": 2.0, "light": 1.0})):
        taken[d.namespace] += 1
        if taken["heavy"] < 3 * count and taken["light"] < 3 * count:  # both still have work
            assert abs(taken["heavy"] - 2 * taken["light"]) <= 2, taken
    assert taken["heavy"] == taken["light"] == 3 * count


def test_interleave_starts_from_what_each_namespace_already_holds():
    fleet = [worker_view(name="w0", labels={}, total={"cpu": 4}, max_concurrent_executions=10)]
    fair = _fair(fleet, Holdings({"ml": {SLOTS: 4}}))  # ml holds 4 of 10 slots: data goes first until it holds as much
    queue = _equal({"ml": 6, "data": 6})
    assert [d.namespace for d in interleave(queue, fair)][:5] == ["data"] * 4 + ["ml"]


@pytest.mark.parametrize(
    ("held", "capacity", "weight", "share"),
    [
        ({}, {"cpu": 8, SLOTS: 4}, 1.0, 0.0),
        ({"cpu": 2}, {"cpu": 8, SLOTS: 4}, 1.0, 0.25),
        ({"cpu": 2, SLOTS: 3}, {"cpu": 8, SLOTS: 4}, 1.0, 0.75),  # the dominant dimension
        ({"cpu": 2, SLOTS: 3}, {"cpu": 8, SLOTS: 4}, 3.0, 0.25),  # over the weight
        ({"cpu": 4}, {"cpu": 8}, 0.0, 0.5),  # a weight of 0 counts as 1
        ({"accel": 5, "cpu": 4}, {"accel": 0, "cpu": 8}, 1.0, 0.5),  # a dimension the fleet lacks is ignored
        ({"gpu": 1}, {"cpu": 8}, 1.0, 0.0),  # so is one it does not have at all
    ],
)
def test_dominant_share_is_the_largest_fraction_over_the_weight(held, capacity, weight, share):
    assert dominant_share(held, capacity, weight) == pytest.approx(share)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["cpu", "accel", SLOTS]), st.floats(0, 50), max_size=3),
    st.dictionaries(st.sampled_from(["cpu", "accel", SLOTS]), st.floats(1, 100), min_size=1, max_size=3),
    st.sampled_from(["cpu", "accel", SLOTS]),
    st.floats(0, 10),
    st.floats(0.5, 4),
)
def test_dominant_share_grows_with_what_is_held_and_shrinks_with_weight(held, capacity, more, extra, weight):
    before = dominant_share(held, capacity, weight)
    assert before >= 0
    assert dominant_share({**held, more: held.get(more, 0) + extra}, capacity, weight) >= before
    assert dominant_share(held, capacity, weight * 2) <= before


@st.composite
def single_class_rounds(draw):
    namespace, priority = draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from([-100, 0, 100]))
    fleet = draw(workers(max_workers=5))
    seeds = draw(demands("h", draw(st.integers(0, 8)), namespaces=[namespace], priorities=[priority]))
    holders = seeded(fleet, seeds)
    return fleet, holders, draw(demands("e", draw(st.integers(0, 30)), namespaces=[namespace], priorities=[priority]))


@settings(max_examples=150, deadline=None)
@given(single_class_rounds())
def test_one_priority_and_one_namespace_place_exactly_as_without_contention(case):
    fleet, holders, queue = case
    priority = queue[0].priority if queue else 0
    ordered = list(order(queue, _fair(fleet, holders)))
    assert ordered == queue
    contention = Contention(holders, None, floor=min([priority, *(h.priority for h in holders)]))
    with_contention = place(ordered, fresh(fleet), contention)
    without = place(queue, fresh(fleet))
    assert with_contention == without
    assert contention.preemptions == [] and contention.touched == set()
