"""Dynamic routing: ``routing=score(...)`` ranks the *eligible* workers by weighted terms
over labels, live metrics and load (ties: least load). Eligibility (requests, affinity)
stays hard: a policy can never pick a worker that fails the check."""

from __future__ import annotations

import copy
import json
import math

import pytest

import flux
from flux import In, RoutingPolicy, label, load, metric, score, workflow
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.domain.routing import LabelEquals, LoadTerm, MetricTerm
from flux.scheduling import placement
from flux.scheduling.demand import Demand, demand_from_row
from flux.scheduling.ranking import best, score_value, score_worker
from flux.scheduling.snapshot import WorkerView


def place(demands, workers) -> list[tuple[str, str]]:
    """Placements as (execution, worker) pairs: allotments are tested in test_allocation.py."""
    return [(p.execution_id, p.worker_name) for p in placement.place(demands, workers)]


def worker(name: str = "w", labels=None, available=None, **overrides) -> WorkerView:
    """cpu 8, memory 32 GiB, disk 1 TiB, all available but what ``available`` says."""
    total = Resources(cpu=8.0, memory=2**35, disk=2**40)
    return WorkerView(
        name=name, labels=labels or {}, total=total, available=total.updated(available or {}), **overrides
    )


POLICY = score((label("zone") == "a") * 10, metric("queue_depth") * -1, load() * -5)
POLICY_JSON = {
    "terms": [
        {"kind": "label_eq", "key": "zone", "value": "a", "weight": 10},
        {"kind": "metric", "name": "queue_depth", "weight": -1},
        {"kind": "load", "weight": -5},
    ]
}


# --- builder and JSON ---------------------------------------------------------------------


def test_builder_terms_and_weights():
    assert (label("zone") == "a") == LabelEquals("zone", "a", 1)
    assert (label("zone") == "a") * 10 == LabelEquals("zone", "a", 10)
    assert 10 * (label("zone") == "a") == LabelEquals("zone", "a", 10)
    assert metric("queue_depth") == MetricTerm("queue_depth", 1)
    assert metric("queue_depth") * -1 == -metric("queue_depth") == MetricTerm("queue_depth", -1)
    assert (metric("q") * 2) * 3 == MetricTerm("q", 6)
    assert load() * -0.5 == LoadTerm(-0.5)


def test_policy_serialises_to_the_documented_json():
    assert POLICY.to_dict() == POLICY_JSON
    assert json.loads(json.dumps(POLICY.to_dict())) == POLICY_JSON


def test_json_round_trip():
    assert RoutingPolicy.from_dict(POLICY_JSON) == POLICY
    assert RoutingPolicy.from_dict(POLICY.to_dict()).to_dict() == POLICY_JSON
    builtins = score(-metric("flux.cpu_percent"), metric("flux.memory_percent") * -0.5, metric("flux.running") * -2)
    assert RoutingPolicy.from_dict(json.loads(json.dumps(builtins.to_dict()))) == builtins


def test_label_values_compare_as_strings():
    policy = score(label("gpu_index") == 0)
    assert policy.to_dict()["terms"][0]["value"] == "0"
    assert score_value(policy, worker(labels={"gpu_index": "0"})) == 1.0


def test_from_dict_defaults_weight_to_one():
    assert RoutingPolicy.from_dict({"terms": [{"kind": "load"}]}) == score(load())


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: score(), "score() needs at least one term"),
        (lambda: score("zone"), "score() term 1: 'zone' is not a routing term"),
        (lambda: score(load(), 3), "score() term 2: 3 is not a routing term"),
        (lambda: score(label("zone")), "score() term 1: label('zone') needs a comparison"),
        (
            lambda: score(metric("q") * math.inf),
            "score() term 1: metric('q') * inf: weight must be a finite number, got inf",
        ),
        (lambda: score(load() * math.nan), "score() term 1: load() * nan: weight must be a finite number, got nan"),
        (lambda: score(label("") == "a"), "score() term 1: (label('') == 'a'): label key must be a non-empty string"),
        (lambda: score(label("z") == None), "score() term 1: (label('z') == None): label z must be compared with"),  # noqa: E711
        (lambda: score(metric("")), "score() term 1: metric(''): metric name must start with"),
        (lambda: score(metric("flux.cpu")), "unknown built-in metric 'flux.cpu' (built-ins: flux.cpu_percent"),
    ],
)
def test_invalid_policies_fail_with_a_clear_message(build, message):
    with pytest.raises(ValueError) as error:
        build()
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"terms": []}, "routing needs at least one term"),
        ({"terms": "load"}, "routing terms must be a list"),
        ({"rules": []}, "routing must be {'terms': [...]}"),
        ({"terms": [{"kind": "load"}, {"kind": "cpu"}]}, "routing term 2 {'kind': 'cpu'}: unknown kind 'cpu'"),
        ({"terms": [{"kind": "metric"}]}, "routing term 1 {'kind': 'metric'}: kind 'metric' needs 'name'"),
        (
            {"terms": [{"kind": "load", "weight": "2"}]},
            "routing term 1 {'kind': 'load', 'weight': '2'}: load() * '2': weight must be a finite number",
        ),
        ({"terms": [{"kind": "load", "weight": True}]}, "weight must be a finite number, got True"),
        ({"terms": [{"kind": "load", "extra": 1}]}, "unexpected 'extra' for kind 'load'"),
        ({"terms": [{"kind": "label_eq", "key": "z", "value": 1}]}, "label value must be a string, got 1"),
        ({"terms": ["load"]}, "routing term 1 'load': a term must be a dict"),
    ],
)
def test_from_dict_validates_naming_the_bad_term(data, message):
    with pytest.raises(ValueError) as error:
        RoutingPolicy.from_dict(data)
    assert message in str(error.value)


def test_not_equal_and_truthiness_are_refused_with_a_hint():
    with pytest.raises(TypeError, match=r"\(label\('zone'\) == 'a'\) \* -1"):
        label("zone") != "a"  # noqa: B015
    with pytest.raises(TypeError, match="not a condition"):
        bool(label("zone") == "a")


# --- scoring and its explanation ----------------------------------------------------------


def test_score_breakdown_explains_each_term():
    w = worker(labels={"zone": "a"}, max_concurrent_executions=4, running=1, metrics={"queue_depth": 3})
    total, breakdown = score_worker(POLICY, w)
    assert breakdown == [
        ("label zone == a: +10", 10.0),
        ("metric queue_depth=3.0 × -1: -3", -3.0),
        ("load 0.25 (1/4 slots busy) × -5: -1.25", -1.25),
    ]
    assert total == 5.75 == score_value(POLICY, w)


def test_score_breakdown_for_misses_and_missing_values():
    w = worker(labels={"zone": "b"}, max_concurrent_executions=0, metrics={"bad": math.nan})
    policy = score(
        (label("zone") == "a") * 10, label("rack") == "r1", metric("queue_depth") * -1, metric("bad"), load()
    )
    total, breakdown = score_worker(policy, w)
    assert [text for text, _ in breakdown] == [
        "label zone=b, not a: 0",
        "label rack missing, not r1: 0",
        "metric queue_depth missing, taken as 0.0 × -1: 0",
        "metric bad=nan not a finite number, taken as 0.0 × 1: 0",
        "load 1.0 (no slots) × 1: +1",
    ]
    assert total == 1.0


def test_builtin_metrics():
    w = worker(
        max_concurrent_executions=4,
        running=3,
        metrics={"flux.cpu_percent": 40.0, "flux.memory_percent": 55.5, "flux.running": 99},
    )
    policy = score(-metric("flux.cpu_percent"), metric("flux.memory_percent") * 2, metric("flux.running"))
    total, breakdown = score_worker(policy, w)
    assert [c for _, c in breakdown] == [-40.0, 111.0, 3.0]  # flux.running comes from `running`, not metrics
    assert breakdown[2][0] == "metric flux.running=3.0 × 1: +3"
    assert total == 74.0


def test_nan_total_ranks_last():
    hot = worker("hot", metrics={"a": 1e308, "b": 1e308})
    policy = score(metric("a") * 10, metric("b") * -10)
    assert score_value(policy, hot) == -math.inf
    assert best([hot, worker("cold", registered_seq=1)], policy).name == "cold"


# --- choosing a worker --------------------------------------------------------------------


def test_placement_picks_the_higher_scored_worker():
    a = worker("a", {"zone": "a"}, max_concurrent_executions=4, running=2, registered_seq=0)
    b = worker("b", {"zone": "b"}, max_concurrent_executions=4, running=0, registered_seq=1)
    assert place([Demand("e1", None, None)], copy.deepcopy([a, b])) == [("e1", "b")]  # least loaded
    assert place([Demand("e1", None, None, POLICY)], [a, b]) == [("e1", "a")]  # zone a: 10 - 2.5 > 0
    assert best([a, b], POLICY) is a


def test_metrics_steer_placement_and_change_between_rounds():
    a = worker("a", max_concurrent_executions=10, metrics={"queue_depth": 7}, registered_seq=0)
    b = worker("b", max_concurrent_executions=10, metrics={"queue_depth": 2}, registered_seq=1)
    policy = score(-metric("queue_depth"))
    assert place([Demand("e1", None, None, policy)], [a, b]) == [("e1", "b")]
    b.metrics["queue_depth"] = 9
    assert place([Demand("e2", None, None, policy)], [a, b]) == [("e2", "a")]


def test_ties_are_broken_by_least_load():
    busy = worker("busy", {"zone": "a"}, max_concurrent_executions=4, running=3, registered_seq=0)
    idle = worker("idle", {"zone": "a"}, max_concurrent_executions=4, running=0, registered_seq=1)
    other = worker("other", {"zone": "b"}, max_concurrent_executions=4, running=0, registered_seq=2)
    policy = score(label("zone") == "a")
    assert place([Demand("e1", None, None, policy)], [busy, idle, other]) == [("e1", "idle")]


def test_load_term_spreads_a_burst_across_workers():
    fleet = [worker(f"w{i}", max_concurrent_executions=4, registered_seq=i) for i in range(3)]
    demands = [Demand(f"e{i}", None, None, score(load() * -1)) for i in range(6)]
    placed = place(demands, fleet)
    assert sorted(name for _, name in placed) == ["w0", "w0", "w1", "w1", "w2", "w2"]


def test_a_policy_never_overrides_eligibility():
    rich = worker("rich", {"zone": "a"}, available={"cpu": 2.0}, registered_seq=0)
    poor_fit = worker("fits", {"zone": "b"}, available={"cpu": 16.0}, registered_seq=1)
    policy = score((label("zone") == "a") * 1000)
    assert place([Demand("e1", ResourceRequest(cpu=8), None, policy)], [rich, poor_fit]) == [("e1", "fits")]
    assert place([Demand("e2", ResourceRequest(cpu=32), None, policy)], [rich, poor_fit]) == []


def test_full_workers_are_never_chosen_however_high_they_score():
    full = worker("full", {"zone": "a"}, max_concurrent_executions=1, running=1)
    spare = worker("spare", {"zone": "b"}, max_concurrent_executions=1, registered_seq=1)
    policy = score((label("zone") == "a") * 1000)
    assert place([Demand("e1", None, None, policy), Demand("e2", None, None, policy)], [full, spare]) == [
        ("e1", "spare")
    ]


def test_demand_from_row_parses_and_caches_routing_json():
    row = dict(requests={"cpu": 1}, affinity={"zone": {"op": "In", "values": ["a"]}})
    d1 = demand_from_row(execution_id="e1", **row, routing=POLICY_JSON)
    d2 = demand_from_row(execution_id="e2", **row, routing=json.loads(json.dumps(POLICY_JSON)))
    assert d1.routing == POLICY and d1.routing is d2.routing  # parsed once, by JSON text
    assert d1.constraint_key == d2.constraint_key and hash(d1.constraint_key)
    assert demand_from_row(execution_id="e3", requests=None, affinity=None).routing is None
    assert demand_from_row(execution_id="e4", requests=None, affinity=None, routing=POLICY).routing is POLICY
    with pytest.raises(ValueError, match="routing term 1"):
        demand_from_row(execution_id="e5", requests=None, affinity=None, routing={"terms": [{"kind": "nope"}]})


def test_constraint_cache_handles_operator_affinities():
    a = worker("a", {"zone": "a", "cuda": "12"}, max_concurrent_executions=4, registered_seq=0)
    b = worker("b", {"zone": "b", "cuda": "11"}, max_concurrent_executions=4, registered_seq=1)
    demands = [
        demand_from_row(execution_id="e1", requests=None, affinity={"cuda": {"op": "Gt", "value": 11}}),
        demand_from_row(execution_id="e2", requests=None, affinity={"cuda": {"op": "Lt", "value": 12}}),
        demand_from_row(execution_id="e3", requests=None, affinity={"cuda": {"op": "Gt", "value": 11}}),
        demand_from_row(execution_id="e4", requests=None, affinity={"zone": {"op": "NotIn", "values": ["a", "b"]}}),
    ]
    assert place(demands, [a, b]) == [("e1", "a"), ("e2", "b"), ("e3", "a")]


# --- the decorator ------------------------------------------------------------------------


def test_workflow_with_routing_publishes_it_in_metadata():
    @workflow.with_options(affinity={"zone": In("a", "b")}, routing=POLICY)
    async def ingest(ctx): ...

    assert ingest.routing == POLICY
    assert ingest.metadata() == {
        "name": "ingest",
        "requests": None,
        "affinity": {"zone": {"op": "In", "values": ["a", "b"]}},
        "routing": POLICY_JSON,
    }


def test_workflow_without_routing_registers_as_before():
    @workflow
    async def plain(ctx): ...

    assert plain.routing is None and "routing" not in plain.metadata()


def test_workflow_accepts_the_json_form():
    @workflow.with_options(routing=POLICY_JSON)
    async def ingest(ctx): ...

    assert ingest.routing == POLICY


@pytest.mark.parametrize(
    ("routing", "message"),
    [
        (metric("q"), "workflow 'wf': routing must be score(...), got a bare term metric('q'); wrap it"),
        ("least-loaded", "workflow 'wf': routing must be score(...), got 'least-loaded'"),
        ({"terms": [{"kind": "gpu"}]}, "workflow 'wf': routing term 1 {'kind': 'gpu'}: unknown kind 'gpu'"),
    ],
)
def test_invalid_routing_fails_at_decoration_naming_the_workflow(routing, message):
    with pytest.raises(ValueError) as error:

        @workflow.with_options(routing=routing)
        async def wf(ctx): ...

    assert message in str(error.value)


def test_public_names_are_exported():
    assert {"score", "label", "metric", "load", "RoutingPolicy"} <= set(flux.__all__)


# Issue 31: at most 64 terms, label keys and values as long as Kubernetes allows.


def test_routing_is_capped_at_64_terms_and_kubernetes_label_lengths():
    assert len(score(*[metric(f"m{i}") for i in range(64)]).terms) == 64
    with pytest.raises(ValueError, match=r"score\(\) has 65 entries, at most 64"):
        score(*[metric(f"m{i}") for i in range(65)])
    many = {"terms": [{"kind": "label_eq", "key": f"k{i}", "value": "v"} for i in range(10_000)]}
    with pytest.raises(ValueError, match="routing has 10000 entries, at most 64"):
        RoutingPolicy.from_dict(many)
    with pytest.raises(ValueError, match="has a name of 64 characters, at most 63"):
        score(label("k" * 64) == "v")
    with pytest.raises(ValueError, match="label value 'vvv.* has 64 characters, at most 63"):
        RoutingPolicy.from_dict({"terms": [{"kind": "label_eq", "key": "zone", "value": "v" * 64}]})
