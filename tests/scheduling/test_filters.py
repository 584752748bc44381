"""The filter pipeline, and the worked example of docs/architecture-scheduling.md: a new
countable dimension (``shm``) added as one filter to a pipeline, placed with and explained."""

from __future__ import annotations

import pytest

from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling import filters
from flux.scheduling.demand import Demand
from flux.scheduling.explain import infeasibility, summarize, verdict
from flux.scheduling.filters import PIPELINE, Consumption, Filter, Reason
from flux.scheduling.placement import place
from flux.scheduling.snapshot import WorkerView

GiB = 1024**3


class Shm(Filter):
    """Shared memory as a dimension of its own: requested as ``resources={"shm": bytes}``,
    advertised with ``--resource shm=<bytes>``, and booked (allotted, taken, released)
    with the other custom resources by the ``custom`` filter."""

    name = "shm"
    phrase = "Insufficient shm"
    consumed = Consumption.ALWAYS

    def applies(self, request, affinity) -> bool:
        return request is not None and "shm" in request.custom

    def check(self, request, affinity, worker) -> Reason | None:
        wanted, free = request.custom["shm"], worker.available.get("shm", 0.0)
        if free >= wanted:
            return None
        return self.reason(f"shm {free / GiB:g}Gi free < requested {wanted / GiB:g}Gi")


@pytest.fixture
def shm():
    """The default pipeline with the shm filter: what placement and explain are given."""
    return PIPELINE.with_filter(Shm())


def worker(name="w", shm_gib=2, available=None, **overrides) -> WorkerView:
    """cpu 4, memory 8 GiB, disk 100 GiB and ``shm_gib`` of shm, all available but what ``available`` says."""
    total = Resources(cpu=4.0, memory=8 * GiB, disk=100 * GiB, shm=shm_gib * GiB)
    fields = dict(labels={}, total=total, available=total.updated(available or {}), max_concurrent_executions=4)
    return WorkerView(name=name, **{**fields, **overrides})


def needs_shm(i, gib=1, **request) -> Demand:
    return Demand(f"e{i}", ResourceRequest(resources={"shm": gib * GiB}, **request), None)


def test_pipeline_order_is_affinity_then_the_request_in_spec_order():
    assert [f.name for f in filters.PIPELINE] == ["affinity", "cpu", "memory", "disk", "gpu", "packages", "custom"]


def test_a_registered_filter_places_and_explains_its_own_dimension(shm):
    assert [f.name for f in shm][-3:] == ["packages", "shm", "custom"]
    box = worker()
    placed = place([needs_shm(i) for i in range(3)], [box], pipeline=shm)
    assert [(p.execution_id, p.allotment.to_json()) for p in placed] == [
        (f"e{i}", {"resources": {"shm": GiB}}) for i in range(2)
    ]

    third = verdict(ResourceRequest(resources={"shm": GiB}), None, box, pipeline=shm)
    assert third.reason == Reason("shm", "Insufficient shm", "shm 0Gi free < requested 1Gi")
    assert summarize([third, verdict(None, None, worker("idle"))]) == "1/2 workers are available: 1 Insufficient shm."
    too_big = ResourceRequest(resources={"shm": 4 * GiB})
    assert infeasibility(too_big, None, [box], pipeline=shm) == (
        "no registered worker could ever satisfy it, even idle: 1 Insufficient shm (of 1)"
    )


def test_a_registered_filter_keeps_its_place_in_the_order(shm):
    short_of_both = worker(shm_gib=0, available={"cpu": 1.0})
    request = ResourceRequest(cpu=2, resources={"shm": GiB, "fpga": 1})
    assert verdict(request, None, short_of_both, pipeline=shm).reason.filter == "cpu"
    assert verdict(request, None, worker(shm_gib=0), pipeline=shm).reason.filter == "shm"
    assert verdict(request, None, worker(), pipeline=shm).message == "resource fpga 0 < requested 1"


def test_unregistered_the_dimension_falls_back_to_a_plain_custom_resource():
    filter = Shm()
    without = PIPELINE.with_filter(filter).without(filter)
    assert "shm" not in [f.name for f in without] and "shm" not in [f.name for f in filters.PIPELINE]
    # still matched and booked, only in the generic words (amounts as plain numbers)
    assert verdict(ResourceRequest(resources={"shm": GiB}), None, worker(shm_gib=0), pipeline=without).reason == Reason(
        "custom", "Insufficient shm", "resource shm 0 < requested 1.07374e+09"
    )
    assert len(place([needs_shm(i) for i in range(3)], [worker()], pipeline=without)) == 2


def test_register_refuses_a_taken_name_and_an_unknown_position(shm):
    with pytest.raises(ValueError, match="already registered"):
        shm.with_filter(Shm())
    other = Shm()
    other.name = "other"
    with pytest.raises(ValueError, match="no filter named 'nope'"):
        shm.with_filter(other, before="nope")


def test_every_reason_names_its_filter_and_phrase():
    poor = worker(
        labels={"zone": "b"},
        available={"cpu": 0.5, "memory": 1, "disk": 1},
        shm_gib=0,
        packages={"torch": "1.0"},
    )
    request = ResourceRequest(cpu=1, memory="1Gi", disk="1Gi", gpu=1, packages=["torch>=2"], resources={"fpga": 1})
    reasons = [f.check(request, {"zone": "a"}, poor) for f in filters.PIPELINE]
    assert [(r.filter, r.phrase) for r in reasons] == [
        ("affinity", "didn't match affinity"),
        ("cpu", "Insufficient cpu"),
        ("memory", "Insufficient memory"),
        ("disk", "Insufficient disk"),
        ("gpu", "Insufficient gpu"),
        ("packages", "missing or mismatched package"),
        ("custom", "Insufficient fpga"),
    ]
