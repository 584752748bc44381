"""Dynamic routing, as properties: a policy never picks an ineligible worker, and
without one placement is the least-loaded choice it always was."""

from __future__ import annotations

import copy
import math

from hypothesis import given, settings
from hypothesis import strategies as st

import flux
from flux import Exists, Gt, In, NotIn, label, load, metric, score
from flux.domain.affinity import normalise_affinity
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling import placement
from flux.scheduling.demand import Demand
from flux.scheduling.filters import check
from flux.scheduling.ranking import best, candidate_key, score_value
from flux.scheduling.snapshot import WorkerView


def place(demands, workers) -> list[tuple[str, str]]:
    return [(p.execution_id, p.worker_name) for p in placement.place(demands, workers)]


def worker(name: str, labels: dict, available: dict, **fields) -> WorkerView:
    total = Resources(cpu=8.0, memory=2**35, disk=2**40)
    return WorkerView(name=name, labels=labels, total=total, available=total.updated(available), **fields)


ZONES = ("a", "b", "c")
LABEL_VALUES = ("a", "b", "c", "10", "11", "12", "x")
finite = st.floats(-1e6, 1e6, allow_nan=False)
metric_values = finite | st.integers(-100, 100) | st.sampled_from([math.nan, math.inf, -math.inf])


@st.composite
def fleets(draw, max_size=6):
    result = []
    for i in range(draw(st.integers(0, max_size))):
        slots = draw(st.integers(0, 4))
        result.append(
            worker(
                f"w{i}",
                labels=draw(st.dictionaries(st.sampled_from(["zone", "cuda", "tier"]), st.sampled_from(LABEL_VALUES))),
                available={"cpu": draw(st.sampled_from([0.5, 2.0, 8.0, 32.0]))},
                max_concurrent_executions=slots,
                running=draw(st.integers(0, slots + 1)),
                registered_seq=draw(st.integers(0, 3)),
                metrics=draw(
                    st.dictionaries(st.sampled_from(["queue_depth", "flux.cpu_percent", "gpu_temp"]), metric_values)
                ),
            )
        )
    return result


operators = st.one_of(
    st.sampled_from(LABEL_VALUES),
    st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=3).map(lambda v: In(*v)),
    st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=3).map(lambda v: NotIn(*v)),
    st.just(Exists()),
    st.just(flux.DoesNotExist()),
    st.integers(9, 13).map(Gt),
    st.integers(9, 13).map(flux.Lt),
)
affinities = st.none() | st.dictionaries(st.sampled_from(["zone", "cuda", "tier"]), operators, max_size=2).map(
    lambda a: normalise_affinity(a, "property")
)
requests = st.none() | st.sampled_from(
    [ResourceRequest(), ResourceRequest(cpu=1), ResourceRequest(cpu=4), ResourceRequest(cpu=16)]
)
weights = st.integers(-100, 100) | finite
terms = st.one_of(
    st.builds(
        lambda k, v, w: (label(k) == v) * w, st.sampled_from(["zone", "cuda"]), st.sampled_from(LABEL_VALUES), weights
    ),
    st.builds(
        lambda n, w: metric(n) * w,
        st.sampled_from(["queue_depth", "flux.cpu_percent", "flux.running", "absent"]),
        weights,
    ),
    st.builds(lambda w: load() * w, weights),
)
policies = st.lists(terms, min_size=1, max_size=4).map(lambda t: score(*t))


@st.composite
def demands(draw, with_policy: bool):
    return [
        Demand(f"e{i}", draw(requests), draw(affinities), draw(st.none() | policies) if with_policy else None)
        for i in range(draw(st.integers(0, 8)))
    ]


@settings(max_examples=300)
@given(fleets(), demands(with_policy=True))
def test_property_a_policy_never_picks_an_ineligible_worker(fleet, queue):
    replay = copy.deepcopy(fleet)
    assignments = dict(place(queue, fleet))
    by_name = {w.name: w for w in replay}
    for demand in queue:
        pool = [w for w in replay if w.free_slots > 0 and check(demand.request, demand.affinity, w) is None]
        if not any(w.free_slots > 0 for w in replay):
            assert demand.execution_id not in assignments
            continue
        if demand.execution_id not in assignments:
            assert pool == []
            continue
        chosen = by_name[assignments[demand.execution_id]]
        assert check(demand.request, demand.affinity, chosen) is None
        assert chosen.free_slots > 0
        if demand.routing is not None:
            top = max(score_value(demand.routing, w) for w in pool)
            assert score_value(demand.routing, chosen) == top
            assert candidate_key(chosen) == min(candidate_key(w) for w in pool if score_value(demand.routing, w) == top)
        chosen.running += 1


@given(fleets(), requests, affinities, policies)
def test_property_best_with_a_policy_only_returns_eligible_workers(fleet, request, affinity, policy):
    eligible = [w for w in fleet if w.free_slots > 0 and check(request, affinity, w) is None]
    chosen = best(eligible, policy)
    assert (chosen is None) == (not eligible)
    if chosen is not None:
        assert chosen in eligible
        assert place([Demand("e", request, affinity, policy)], copy.deepcopy(fleet)) == [("e", chosen.name)]


def legacy_place(demands: list[Demand], workers: list[WorkerView]) -> list[tuple[str, str]]:
    """Placement as it was before routing: first eligible worker in least-loaded order."""
    free = [w for w in workers if w.free_slots > 0]
    eligible: dict[tuple, list[WorkerView]] = {}
    assignments = []
    for demand in demands:
        if not free:
            break
        if demand.request is None and not demand.affinity:
            pool = free
        else:
            key = (demand.request, tuple(sorted((demand.affinity or {}).items())))
            if key not in eligible:
                eligible[key] = [w for w in workers if legacy_check(demand.request, demand.affinity, w)]
            pool = [w for w in eligible[key] if w.free_slots > 0]
        if not pool:
            continue
        chosen = min(pool, key=candidate_key)
        chosen.running += 1
        if chosen.free_slots == 0:
            free.remove(chosen)
        assignments.append((demand.execution_id, chosen.name))
    return assignments


def legacy_check(request, affinity, w) -> bool:
    labels_ok = all(key in w.labels and str(w.labels[key]) == str(v) for key, v in (affinity or {}).items())
    return labels_ok and check(request, None, w) is None


equality_affinities = st.none() | st.dictionaries(
    st.sampled_from(["zone", "cuda", "tier"]), st.sampled_from(LABEL_VALUES), max_size=2
)


@given(fleets(), st.lists(st.tuples(requests, equality_affinities), max_size=8))
def test_property_without_a_policy_placement_is_the_pre_existing_least_loaded_choice(fleet, rows):
    queue = [Demand(f"e{i}", request, affinity) for i, (request, affinity) in enumerate(rows)]
    assert place(queue, copy.deepcopy(fleet)) == legacy_place(queue, copy.deepcopy(fleet))
