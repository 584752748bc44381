"""ResourceRequest, as specified in worker-resources.md ("How workflows request resources",
"Custom resource fields"): a closed, validated schema whose errors name the field and value."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux.domain.resource_request import (
    InvalidResourceRequest,
    ResourceRequest,
    format_bytes,
    parse_cpu,
    parse_quantity,
)

Ki, Mi, Gi = 1024, 1024**2, 1024**3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512Mi", 512 * Mi),
        ("8Gi", 8 * Gi),
        ("1G", 10**9),
        ("1.5Gi", 1_610_612_736),
        ("500M", 500 * 10**6),
        ("1k", 1000),
        ("1Ki", Ki),
        ("2Ti", 2 * 1024**4),
        ("3T", 3 * 10**12),
        ("1Pi", 1024**5),
        ("1E", 10**18),
        ("1Ei", 1024**6),
        ("4096", 4096),
        (" 8Gi ", 8 * Gi),
        (10_000_000_000, 10_000_000_000),
        (1, 1),
        (1e9, 10**9),
    ],
)
def test_spec_memory_and_disk_accept_kubernetes_quantities_and_bytes(text, expected):
    assert parse_quantity(text, "ResourceRequest.memory") == expected
    assert ResourceRequest(memory=text).memory == expected
    assert ResourceRequest(disk=text).disk == expected


def test_fractional_bytes_round_up_like_kubernetes():
    assert parse_quantity("0.5", "f") == 1
    assert parse_quantity("1.0001Ki", "f") == 1025


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"]))
def test_quantity_suffix_multiplies_the_number(number, suffix):
    factor = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": Ki, "Mi": Mi, "Gi": Gi, "Ti": 1024**4}[suffix]
    assert parse_quantity(f"{number}{suffix}", "f") == number * factor


@given(st.integers(min_value=1, max_value=2**63 - 1))
def test_formatted_bytes_parse_back_to_the_same_number(n):
    assert parse_quantity(format_bytes(n), "f") == n


@pytest.mark.parametrize(
    ("value", "expected"),
    [(4, 4.0), (0.5, 0.5), ("4", 4.0), ("0.5", 0.5), ("500m", 0.5), ("1500m", 1.5), ("2.5", 2.5)],
)
def test_spec_cpu_accepts_cores_and_millicores(value, expected):
    assert parse_cpu(value) == expected
    assert ResourceRequest(cpu=value).cpu == expected


def test_spec_example_request_is_accepted():
    request = ResourceRequest(cpu=4, memory="8Gi", disk=10_000_000_000, gpu=1, packages=["torch>=2.0", "transformers"])
    assert (request.cpu, request.memory, request.disk, request.gpu) == (4.0, 8 * Gi, 10_000_000_000, 1)
    assert request.packages == ("torch>=2.0", "transformers")
    assert request.describe() == "cpu=4, memory=8Gi, disk=10G, gpu=1, packages=[torch>=2.0, transformers]"


def test_every_field_is_optional():
    request = ResourceRequest()
    assert request.is_empty
    assert request.to_dict() == {}
    assert request.describe() == "none"
    assert (request.cpu, request.memory, request.disk, request.gpu, request.packages) == (None,) * 4 + ((),)


@pytest.mark.parametrize(
    ("text", "name", "specifier"),
    [
        ("torch>=2.0", "torch", ">=2.0"),
        ("numpy==1.26.*", "numpy", "==1.26.*"),
        ("pandas>=2,<3", "pandas", "<3,>=2"),
        ("requests~=2.31", "requests", "~=2.31"),
        ("transformers", "transformers", ""),
    ],
)
def test_spec_packages_accept_pep440_requirements(text, name, specifier):
    request = ResourceRequest(packages=[text])
    assert request.packages == (text,)
    (requirement,) = request.requirements
    assert (requirement.name, str(requirement.specifier)) == (name, specifier)


@pytest.mark.parametrize(
    ("kwargs", "field", "shown"),
    [
        ({"cpu": 0}, "cpu", "0"),
        ({"cpu": -1}, "cpu", "-1"),
        ({"cpu": True}, "cpu", "True"),
        ({"cpu": "four"}, "cpu", "'four'"),
        ({"cpu": "0m"}, "cpu", "'0m'"),
        ({"cpu": float("nan")}, "cpu", "nan"),
        ({"memory": 0}, "memory", "0"),
        ({"memory": -512}, "memory", "-512"),
        ({"memory": "0Gi"}, "memory", "'0Gi'"),
        ({"memory": True}, "memory", "True"),
        ({"memory": "8Gb"}, "memory", "'8Gb'"),
        ({"memory": "8 Gi"}, "memory", "'8 Gi'"),
        ({"memory": "8K"}, "memory", "'8K'"),
        ({"memory": "8ki"}, "memory", "'8ki'"),
        ({"memory": "-1Gi"}, "memory", "'-1Gi'"),
        ({"memory": [8]}, "memory", "[8]"),
        ({"disk": "ten gigs"}, "disk", "'ten gigs'"),
        ({"disk": -1}, "disk", "-1"),
        ({"disk": float("inf")}, "disk", "inf"),
        ({"gpu": 0}, "gpu", "0"),
        ({"gpu": -1}, "gpu", "-1"),
        ({"gpu": 1.5}, "gpu", "1.5"),
        ({"gpu": True}, "gpu", "True"),
        ({"gpu": "1"}, "gpu", "'1'"),
        ({"packages": "torch>=2.0"}, "packages", "'torch>=2.0'"),
        ({"packages": ["torch>>2.0"]}, "packages", "'torch>>2.0'"),
        ({"packages": [""]}, "packages", "''"),
        ({"packages": [42]}, "packages", "42"),
        ({"packages": {"torch": ">=2"}}, "packages", "{'torch': '>=2'}"),
    ],
)
def test_spec_invalid_values_are_rejected_naming_field_and_value(kwargs, field, shown):
    with pytest.raises(InvalidResourceRequest) as excinfo:
        ResourceRequest(**kwargs)
    assert f"ResourceRequest.{field}" in str(excinfo.value)
    assert shown in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)


def test_unparsable_memory_message_shows_accepted_formats():
    with pytest.raises(InvalidResourceRequest) as excinfo:
        ResourceRequest(memory="8Gb")
    assert str(excinfo.value) == (
        "ResourceRequest.memory: cannot parse '8Gb' as a quantity (use bytes or a suffix like 512Mi, 8Gi, 1G, 500M)"
    )


def test_spec_schema_is_closed_and_unknown_fields_point_to_resources_and_labels():
    """Unknown top-level keywords stay rejected; counted extras go under resources={...} (beyond the spec)."""
    with pytest.raises(InvalidResourceRequest) as excinfo:
        ResourceRequest(cpu=1, fpga=1)
    assert str(excinfo.value) == (
        "ResourceRequest got an unknown field 'fpga';"
        " fields are cpu, memory, disk, gpu, gpu_memory, packages, resources. "
        "Count anything else with resources={...}, or advertise it with worker labels and route with affinity"
    )


@pytest.mark.parametrize(
    "resources, message",
    [
        ({"FPGA": 1}, "resource name 'FPGA' must be lowercase"),
        ({"fpga": 0}, "ResourceRequest.resources['fpga']: must be a positive number, got 0"),
        ({"fpga": True}, "must be a positive number, got True"),
        (["fpga"], "must be a mapping of resource name to amount"),
    ],
)
def test_custom_resources_are_validated_naming_the_field(resources, message):
    with pytest.raises(InvalidResourceRequest, match=re.escape(message)):
        ResourceRequest(resources=resources)


def test_custom_resources_round_trip_and_chain():
    request = ResourceRequest.with_cpu(1).with_resources({"matlab_license": 1, "fpga": 2})
    assert request.custom == {"fpga": 2.0, "matlab_license": 1.0}
    assert request.to_dict() == {"cpu": 1.0, "resources": {"fpga": 2, "matlab_license": 1}}
    assert ResourceRequest.from_dict(request.to_dict()) == request


def test_from_dict_rejects_unknown_keys_the_same_way():
    with pytest.raises(InvalidResourceRequest, match="unknown fields 'license', 'rack'"):
        ResourceRequest.from_dict({"cpu": 1, "rack": "a1", "license": "matlab"})
    with pytest.raises(InvalidResourceRequest, match="expected a mapping"):
        ResourceRequest.from_dict(["cpu", 1])


def test_spec_short_forms_work_on_the_class_and_chain_on_instances():
    request = ResourceRequest.with_cpu(4).with_memory("8Gi").with_gpu(1).with_disk("10G")
    request = request.with_packages(["torch>=2.0"])
    assert request == ResourceRequest(cpu=4, memory="8Gi", gpu=1, disk=10**10, packages=["torch>=2.0"])
    assert ResourceRequest.with_gpu(2) == ResourceRequest(gpu=2)
    assert request.with_cpu(8).cpu == 8.0 and request.cpu == 4.0


def test_short_forms_validate():
    with pytest.raises(InvalidResourceRequest, match=r"ResourceRequest\.gpu.*1\.5"):
        ResourceRequest.with_cpu(2).with_gpu(1.5)


def test_requests_compare_and_hash_by_value():
    assert ResourceRequest(memory="1Gi") == ResourceRequest(memory=Gi)
    assert ResourceRequest(cpu="500m") == ResourceRequest(cpu=0.5)
    assert len({ResourceRequest(gpu=1), ResourceRequest(gpu=1)}) == 1


def test_request_is_frozen():
    with pytest.raises(AttributeError):
        ResourceRequest(cpu=1).cpu = 2


requests = st.builds(
    ResourceRequest,
    cpu=st.none() | st.floats(min_value=0.001, max_value=512),
    memory=st.none() | st.integers(min_value=1, max_value=2**50),
    disk=st.none() | st.integers(min_value=1, max_value=2**50),
    gpu=st.none() | st.integers(min_value=1, max_value=16),
    packages=st.lists(st.sampled_from(["torch>=2.0", "numpy==1.26.*", "pandas>=2,<3", "transformers"])),
)


@given(requests)
def test_to_dict_round_trips_through_from_dict(request):
    data = request.to_dict()
    assert ResourceRequest.from_dict(data) == request
    assert all(value is not None for value in data.values())
    assert request.is_empty == (data == {})


@pytest.mark.parametrize("field", ["memory", "disk"])
@pytest.mark.parametrize(
    "value", ["99999999999999999999999999Ei", "8Ei", "9223372036854775808", 2**63, 10**400, 1e19, float("inf")]
)
def test_quantities_above_int64_are_refused_naming_the_field(field, value):
    """Issue 31: '99999999999999999999999999Ei' was stored as ~1.15e44 bytes."""
    with pytest.raises(
        InvalidResourceRequest,
        match=f"ResourceRequest.{field}: .* is more than the largest quantity, 2\\*\\*63-1 bytes",
    ):
        ResourceRequest(**{field: value})


def test_the_largest_quantity_is_int64_max():
    assert ResourceRequest(memory=2**63 - 1).memory == 2**63 - 1
    assert ResourceRequest(disk="9223372036854775807").disk == 2**63 - 1
    assert ResourceRequest(memory="7Ei").memory == 7 * 1024**6


@pytest.mark.parametrize(
    "kwargs",
    [dict(gpu=2**63), dict(cpu=10**400), dict(resources={"fpga": 10**400}), dict(resources={"fpga": float("inf")})],
)
def test_counts_past_int64_are_refused_not_an_overflow(kwargs):
    with pytest.raises(InvalidResourceRequest, match="up to 2\\*\\*63-1|must be a positive number"):
        ResourceRequest(**kwargs)
