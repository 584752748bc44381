"""Probed quantities as data: one ``Capacity`` filter per dimension, by name, over the
view's ``total`` and ``available`` mappings (properties), and the worked example of
docs/architecture-scheduling.md: a new probed dimension (``scratch``) added as one
``Capacity`` at run time, with no other module touched."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux.domain.allotment import Allotment
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling import filters
from flux.scheduling.allocation import take, with_allotments
from flux.scheduling.demand import Demand
from flux.scheduling.explain import infeasibility, verdict
from flux.scheduling.filters import PIPELINE, Reason
from flux.scheduling.filters.capacity import CPU, DISK, MEMORY, PROBED, Capacity, _bytes
from flux.scheduling.placement import place
from flux.scheduling.snapshot import WorkerView

GiB = 1024**3
MiB = 1024**2


def view(total: dict, available: dict | None = None, allocation: str = "sample", slots: int = 4) -> WorkerView:
    return WorkerView(
        name="w",
        labels={},
        total=Resources(total),
        available=None if available is None else Resources(available),
        max_concurrent_executions=slots,
        allocation=allocation,
    )


# --- the built-in dimensions, by name ------------------------------------------------


def test_each_probed_dimension_is_one_capacity_filter_named_by_its_dimension():
    assert [f.name for f in PROBED] == ["cpu", "memory", "disk"] and PROBED == (CPU, MEMORY, DISK)
    assert [f.dimension for f in PROBED] == ["cpu", "memory", "disk"]
    assert [f.field for f in PROBED] == ["cpu_available", "memory_available", "disk_free"]
    assert filters.PIPELINE.filters[1:4] == PROBED


def test_reasons_keep_the_fields_the_api_shows():
    poor = view({"cpu": 8.0, "memory": 32 * GiB, "disk": 500 * GiB}, {"cpu": 2.0, "memory": 4 * GiB, "disk": 10 * GiB})
    request = ResourceRequest(cpu=4, memory="8Gi", disk="20Gi")
    assert [f.check(request, None, poor).message for f in PROBED] == [
        "cpu_available 2.0 < requested 4",
        "memory_available 4.0Gi < requested 8Gi",
        "disk_free 10.0Gi < requested 20Gi",
    ]
    reserving = view(
        {"cpu": 8.0, "memory": 32 * GiB, "disk": 500 * GiB},
        {"cpu": 2.0, "memory": 4 * GiB, "disk": 10 * GiB},
        "reserve",
    )
    assert CPU.check(request, None, reserving).message == "cpu_available 2.0 after reservations < requested 4"


# --- properties over mappings ----------------------------------------------------------

DIMENSIONS = ("cpu", "memory", "disk")
quantities = st.integers(0, 2**45)


@st.composite
def views_and_requests(draw):
    total = {name: draw(quantities) for name in DIMENSIONS}
    available = {name: draw(st.integers(0, total[name])) for name in DIMENSIONS if draw(st.booleans())}
    asked = {name: draw(st.integers(1, 2**45)) for name in DIMENSIONS if draw(st.booleans())}
    allocation = draw(st.sampled_from(["sample", "reserve"]))
    w = view(total, {**total, **available}, allocation)
    return w, ResourceRequest(**asked) if asked else None


@given(views_and_requests())
def test_property_a_capacity_passes_exactly_when_available_covers_the_request(case):
    w, request = case
    for f in PROBED:
        if not f.applies(request, None):
            assert request is None or f.name not in request.quantities
            continue
        reason = f.check(request, None, w)
        assert (reason is None) == (w.available.get(f.name, 0) >= request.quantities[f.name])
        assert f.bind(request, None)(w) == reason  # what placement scans with
        if reason is not None:
            assert (reason.filter, reason.phrase) == (f.name, f"Insufficient {f.name}")
            assert reason.message.startswith(f"{f.field} ")
    assert (filters.check(request, None, w) is None) == (
        request is None or w.available.covers(request.quantities.without(["gpu"]))
    )


@given(views_and_requests(), st.lists(st.dictionaries(st.sampled_from(DIMENSIONS), st.integers(0, 2**40)), max_size=4))
def test_property_reserve_availability_is_the_sample_tempered_by_what_is_held(case, held):
    w, _ = case
    allotments = [Allotment(Resources(a)) for a in held]
    fresh = with_allotments(w.evolve(), allotments)
    for name in DIMENSIONS:
        left = w.total[name] - sum(a.get(name, 0) for a in held)
        expected = min(w.available[name], left) if w.reserves else w.available[name]
        assert fresh.available[name] == expected
    assert w.available == view(dict(w.total), dict(w.available)).available  # the view it came from is untouched


@given(views_and_requests(), st.integers(1, 4))
def test_property_what_a_round_takes_is_what_a_fresh_view_applies(case, placements):
    """Counting allotments one by one within a round and applying them to a fresh view agree."""
    w, request = case
    if request is None:
        return
    active = filters.active(request, None)
    allotment = Allotment(request.quantities)
    counted = w.evolve()
    for _ in range(placements):
        take(active, counted, allotment)
    fresh = with_allotments(w.evolve(), [allotment] * placements)
    if w.reserves:
        for name in request.quantities:
            assert fresh.available[name] == min(
                w.available[name], w.total[name] - placements * request.quantities[name]
            )
            assert counted.available[name] == w.available[name] - placements * request.quantities[name]
    else:
        assert counted.available == fresh.available == w.available


@given(st.integers(0, 2**50), st.integers(1, 2**50))
def test_property_bytes_are_shown_apart_whenever_they_differ(available, requested):
    have, want = _bytes(available, requested)
    assert (have == want) == (available == requested)


# --- a new probed dimension, added at run time -------------------------------------------


@pytest.fixture
def scratch():
    """What adding a probed dimension adds to flux/scheduling/filters/capacity.py (one line),
    added here to a pipeline of its own instead: the probe publishes it, everything between
    carries it as data."""
    return Capacity("scratch", _bytes)


@pytest.fixture
def scratched(scratch):
    """The default pipeline with ``scratch``: what placement and explain are given."""
    return PIPELINE.with_filter(scratch, before="gpu")


def scratch_box(allocation="sample", free=6 * GiB) -> WorkerView:
    total = Resources(cpu=4.0, memory=8 * GiB, disk=100 * GiB, scratch=10 * GiB)
    return WorkerView(
        name="box",
        labels={},
        total=total,
        available=total.updated({"scratch": free}),
        max_concurrent_executions=4,
        allocation=allocation,
    )


def needs_scratch(i, gib=4) -> Demand:
    return Demand(f"e{i}", ResourceRequest(resources={"scratch": gib * GiB}), None)


def test_a_new_probed_dimension_is_one_capacity_registered_at_run_time(scratch, scratched):
    assert [f.name for f in scratched] == [
        "affinity",
        "cpu",
        "memory",
        "disk",
        "scratch",
        "gpu",
        "packages",
        "custom",
    ]
    request = ResourceRequest(resources={"scratch": 8 * GiB})
    assert scratched.active(request, None) == (scratch,)  # the custom filter leaves it to its own filter
    assert verdict(request, None, scratch_box(), pipeline=scratched).reason == Reason(
        "scratch", "Insufficient scratch", "scratch_available 6.0Gi < requested 8Gi"
    )
    assert (
        verdict(request, None, scratch_box("reserve"), pipeline=scratched).message
        == "scratch_available 6.0Gi after reservations < requested 8Gi"
    )
    assert infeasibility(request, None, [scratch_box()], pipeline=scratched) is None  # 10 GiB when idle
    too_big = ResourceRequest(resources={"scratch": 11 * GiB})
    assert infeasibility(too_big, None, [scratch_box()], pipeline=scratched) == (
        "no registered worker could ever satisfy it, even idle: 1 Insufficient scratch (of 1)"
    )


def test_a_new_probed_dimension_is_sampled_like_cpu_memory_and_disk(scratched):
    # sample mode: the threshold model, a sampled quantity is not counted within a round
    placed = place([needs_scratch(i) for i in range(3)], [scratch_box("sample")], pipeline=scratched)
    assert [p.allotment.to_json() for p in placed] == [{"resources": {"scratch": 4 * GiB}}] * 3
    # reserve: counted within a round, and applied from what runs
    reserving = place([needs_scratch(i) for i in range(3)], [scratch_box("reserve")], pipeline=scratched)
    assert [p.execution_id for p in reserving] == ["e0"]
    held = [Allotment.from_json({"resources": {"scratch": 4 * GiB}})] * 2
    assert with_allotments(scratch_box("reserve", free=9 * GiB), held, scratched).available["scratch"] == 2 * GiB
    assert with_allotments(scratch_box("sample", free=9 * GiB), held, scratched).available["scratch"] == 9 * GiB


def test_unregistered_a_probed_dimension_falls_back_to_a_counted_custom_resource(scratch, scratched):
    without = scratched.without(scratch)
    request = ResourceRequest(resources={"scratch": 8 * GiB})
    assert [f.name for f in without.active(request, None)] == ["custom"]
    assert verdict(request, None, scratch_box(), pipeline=without).reason == Reason(
        "custom", "Insufficient scratch", "resource scratch 6.44245e+09 < requested 8.58993e+09"
    )
