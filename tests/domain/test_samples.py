"""A sample's wire form and the material-change rule, over mappings of dimensions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest, parse_custom_resources
from flux.domain.resources import Resources
from flux.domain.samples import (
    MIN_BYTES_DELTA,
    available_field,
    from_wire,
    probed_problem,
    quantities_changed,
    resources_changed,
    to_wire,
)

GiB = 1024**3
WIRE = {
    "cpu_total": 8.0,
    "cpu_available": 8.0,
    "cpu_percent": 5.0,
    "memory_total": 16 * GiB,
    "memory_available": 8 * GiB,
    "disk_total": 100 * GiB,
    "disk_free": 50 * GiB,
    "gpus": [],
}


def test_the_wire_keeps_its_fields_and_carries_other_dimensions_in_two_mappings():
    total, available = from_wire(WIRE)
    assert total == {"cpu": 8.0, "memory": 16 * GiB, "disk": 100 * GiB}
    assert available == {"cpu": 8.0, "memory": 8 * GiB, "disk": 50 * GiB}
    assert to_wire(total, available) == {name: WIRE[name] for name in WIRE if name not in ("cpu_percent", "gpus")}
    wider = to_wire(total.updated({"scratch": 10 * GiB}), available.updated({"scratch": 4 * GiB}))
    assert (wider["capacity"], wider["available"]) == ({"scratch": 10 * GiB}, {"scratch": 4 * GiB})
    assert from_wire(wider) == (total.updated({"scratch": 10 * GiB}), available.updated({"scratch": 4 * GiB}))


@given(
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "disk", "scratch", "nvme.fast"]), st.integers(0, 2**50), min_size=1
    )
)
def test_property_wire_round_trip(total):
    total = Resources(total)
    available = Resources({name: amount // 2 for name, amount in total.items()})
    back_total, back_available = from_wire(to_wire(total, available))
    assert back_total.without(["cpu", "memory", "disk"]) == total.without(["cpu", "memory", "disk"])
    assert all(back_total.amount(name) == total.amount(name) for name in ("cpu", "memory", "disk"))
    assert all(back_available.amount(name) == available.amount(name) for name in total)


def test_shown_fields_by_dimension():
    assert [available_field(name) for name in ("cpu", "memory", "disk", "scratch")] == [
        "cpu_available",
        "memory_available",
        "disk_free",
        "scratch_available",
    ]


def test_wire_mappings_refuse_well_known_or_malformed_names_and_bad_quantities():
    assert probed_problem({"scratch": 0, "nvme.fast": 2**63 - 1}) is None
    assert "not one of cpu" in probed_problem({"memory": 1})
    assert "lowercase" in probed_problem({"Scratch": 1})
    assert "2**63-1" in probed_problem({"scratch": 2**63})
    assert "2**63-1" in probed_problem({"scratch": float("nan")})


def moved(**changes) -> bool:
    return resources_changed(WIRE, {**WIRE, **changes})


def test_material_changes_of_the_well_known_dimensions_are_as_before():
    assert not moved()
    assert moved(cpu_available=7.0) and moved(cpu_total=4.0) and moved(memory_total=15 * GiB) and moved(disk_total=1)
    assert not moved(memory_available=8 * GiB - 100 * 1024**2) and moved(
        memory_available=8 * GiB - 200 * 1024**2
    )  # 1% of 16 GiB
    small = {**WIRE, "memory_total": GiB, "memory_available": GiB // 2}  # 1% is under the 64 MiB floor
    assert not resources_changed(small, {**small, "memory_available": GiB // 2 - (MIN_BYTES_DELTA - 1)})
    assert resources_changed(small, {**small, "memory_available": GiB // 2 - MIN_BYTES_DELTA})
    assert not moved(disk_free=50 * GiB + GiB - 1) and moved(disk_free=50 * GiB + GiB + 1)  # 1% of 100 GiB
    assert not moved(cpu_percent=24.0) and moved(cpu_percent=25.0)
    assert resources_changed(None, WIRE)


def test_material_changes_of_another_dimension_by_1_percent_of_its_total():
    before = (Resources(scratch=1000), Resources(scratch=500))
    assert not quantities_changed(before, (Resources(scratch=1000), Resources(scratch=509)))
    assert quantities_changed(before, (Resources(scratch=1000), Resources(scratch=510)))
    assert quantities_changed(before, (Resources(scratch=1001), Resources(scratch=500)))  # any change of a total
    assert quantities_changed(before, (Resources(scratch=1000, other=1), Resources(scratch=500, other=1)))  # a new one
    assert not quantities_changed((Resources(tiny=0), Resources(tiny=0)), (Resources(tiny=0), Resources(tiny=0)))
    wire = {**WIRE, "capacity": {"scratch": 1000}, "available": {"scratch": 500}}
    assert not resources_changed(wire, {**wire, "available": {"scratch": 505}})
    assert resources_changed(wire, {**wire, "available": {"scratch": 400}})
    assert resources_changed(WIRE, wire)


def test_a_custom_resource_cannot_take_a_well_known_name():
    for name in ("cpu", "memory", "disk", "gpu"):
        with pytest.raises(InvalidResourceRequest, match=f"'{name}' is not a custom resource"):
            ResourceRequest(resources={name: 1})
        with pytest.raises(InvalidResourceRequest, match="custom_resources"):
            parse_custom_resources({name: 1}, "custom_resources")


def test_a_request_is_its_quantities_by_dimension():
    request = ResourceRequest(cpu="500m", memory="1Gi", gpu=1, packages=["torch"], resources={"fpga": 2, "scratch": 10})
    assert request.quantities == Resources(cpu=0.5, memory=GiB, gpu=1, fpga=2.0, scratch=10.0)
    assert isinstance(request.quantities, Resources) and ResourceRequest().quantities == {}
