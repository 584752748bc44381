"""Workers restricted to namespaces (``flux start worker --namespace``): placement never
offers one work of another namespace, and explain names the restriction."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.demand import Demand
from flux.scheduling.explain import infeasibility, summarize, verdict
from flux.scheduling.filters import Reason
from flux.scheduling.placement import place
from flux.scheduling.pool import FreePool
from flux.scheduling.snapshot import WorkerView, worker_view

NAMESPACES = ["default", "ml", "data"]


def box(name: str, namespaces=None, slots: int = 2, cpu: float = 8.0) -> WorkerView:
    return worker_view(
        name=name, labels={"zone": "a"}, total={"cpu": cpu}, max_concurrent_executions=slots, namespaces=namespaces
    )


@st.composite
def fleets_and_queues(draw):
    restrictions = st.none() | st.lists(st.sampled_from(NAMESPACES), max_size=2)
    fleet = [
        box(f"w{i}", draw(restrictions), draw(st.integers(1, 3)), draw(st.sampled_from([2.0, 8.0])))
        for i in range(draw(st.integers(0, 6)))
    ]
    kinds = [(None, None), (ResourceRequest(cpu=4), None), (None, {"zone": "a"})]
    queue = [
        Demand(f"e{i}", *draw(st.sampled_from(kinds)), namespace=draw(st.sampled_from(NAMESPACES)))
        for i in range(draw(st.integers(0, 12)))
    ]
    return fleet, queue


@settings(max_examples=200, deadline=None)
@given(fleets_and_queues())
def test_property_a_restricted_worker_is_never_chosen_for_another_namespace(case):
    fleet, queue = case
    by_name = {w.name: w for w in fleet}
    namespace_of = {d.execution_id: d.namespace for d in queue}
    placements = place(queue, FreePool(fleet))
    for p in placements:
        served = by_name[p.worker_name].namespaces
        assert served is None or namespace_of[p.execution_id] in served
    # and nothing that some free, serving worker could take is left behind by the gate
    left = [d for d in queue if d.execution_id not in {p.execution_id for p in placements}]
    for d in left:
        assert not any(verdict(d.request, d.affinity, w, d.namespace).available for w in fleet)


def test_unconstrained_work_keeps_the_fast_path_while_no_worker_is_restricted():
    pool = FreePool([box("a"), box("b")])
    assert pool.restricted == 0
    placed = place([Demand("e1", None, None, namespace="ml")], pool)
    assert [p.worker_name for p in placed] == ["a"]
    pool.put(box("c", ["ml"]))
    assert pool.restricted == 1
    pool.drop("c")
    assert pool.restricted == 0


def test_a_dedicated_pool_takes_its_namespace_only():
    fleet = [box("ml-1", ["ml"], slots=4), box("any", slots=1)]
    queue = [Demand(f"d{i}", None, None, namespace="default") for i in range(3)]
    queue += [Demand(f"m{i}", None, None, namespace="ml") for i in range(3)]
    placed = {p.execution_id: p.worker_name for p in place(queue, FreePool(fleet))}
    assert placed == {"d0": "any", "m0": "ml-1", "m1": "ml-1", "m2": "ml-1"}


def test_explain_names_the_restriction():
    fleet = [box("ml-1", ["ml", "data"]), box("busy", slots=1)]
    fleet[1].running = 1
    verdicts = [verdict(None, None, w, "default") for w in fleet]
    assert verdicts[0].reason == Reason("namespace", "serves other namespaces", "serves namespaces data, ml only")
    assert summarize(verdicts) == "0/2 workers are available: 1 all slots busy, 1 serves other namespaces."
    assert verdict(None, None, fleet[0], "ml").available
    assert infeasibility(None, None, fleet, "default") is None  # the busy worker will free up


def test_infeasible_when_every_worker_serves_other_namespaces():
    fleet = [box("ml-1", ["ml"]), box("ml-2", ["ml"])]
    assert infeasibility(None, None, fleet, "default") == (
        "no registered worker serves namespace 'default': all 2 serve other namespaces only"
    )
    assert infeasibility(None, None, fleet, "ml") is None
    too_big = infeasibility(ResourceRequest(cpu=64), None, [*fleet, box("any")], "default")
    assert (
        too_big
        == "no registered worker could ever satisfy it, even idle: 2 serves other namespaces, 1 Insufficient cpu (of 3)"
    )
