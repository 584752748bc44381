"""``Gang`` (issue 53): a frozen, validated value whose errors name the field, with a JSON
form that round-trips (the wire and the workflow version row)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux import Gang as Exported
from flux.domain.gang import DEFAULT_MAX_SIZE, DEFAULT_START_TIMEOUT, Gang, InvalidGang, label_key_problem


def test_the_issue_example_and_its_defaults():
    gang = Gang(size=4, topology="rack", prefer="zone", per_worker=1, start_timeout="5m")
    assert (gang.size, gang.topology, gang.prefer, gang.per_worker, gang.start_timeout) == (4, "rack", "zone", 1, 300.0)
    plain = Gang(size=2, topology="topology.kubernetes.io/zone")
    assert (plain.prefer, plain.per_worker, plain.start_timeout) == (None, 1, DEFAULT_START_TIMEOUT)
    assert Exported is Gang
    assert gang.describe() == "4 members in one rack, prefer zone, 1 a worker, start within 5m"


def test_it_is_frozen_and_hashable():
    gang = Gang(size=8, topology="rack", per_worker=8)
    with pytest.raises(AttributeError):
        gang.size = 2  # type: ignore[misc]
    assert gang == Gang(size=8.0, topology="rack", per_worker=8, start_timeout=300)
    assert len({gang, Gang(size=8, topology="rack", per_worker=8)}) == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"size": 1}, "Gang.size: must be at least 2, got 1"),
        ({"size": 0}, "Gang.size: must be at least 2, got 0"),
        ({"size": 257}, "Gang.size: 257 is more than the server's cap on gang size, 256"),
        ({"size": 2.5}, "Gang.size: must be a whole number, got 2.5"),
        ({"size": True}, "Gang.size: must be a whole number, got True"),
        ({"size": "4"}, "Gang.size: must be a whole number, got '4'"),
        ({"topology": ""}, "Gang.topology: must be a label key such as 'rack'"),
        ({"topology": None}, "Gang.topology: must be a label key such as 'rack'"),
        ({"topology": "my rack"}, "Gang.topology: 'my rack' is not a label key"),
        ({"topology": "-rack"}, "Gang.topology: '-rack' is not a label key"),
        ({"topology": "Example.COM/rack"}, "Gang.topology: 'Example.COM/rack' is not a label key"),
        ({"topology": "a" * 64}, "Gang.topology: label key 'aaaa"),
        ({"prefer": "zone="}, "Gang.prefer: 'zone=' is not a label key"),
        ({"prefer": "rack"}, "Gang.prefer: 'rack' is the topology itself"),
        ({"per_worker": 0}, "Gang.per_worker: must be at least 1, got 0"),
        ({"per_worker": 5}, "Gang.per_worker: 5 is more than the gang's size, 4"),
        ({"start_timeout": "soon"}, "Gang.start_timeout: 'soon' is not a duration"),
        ({"start_timeout": 0}, "Gang.start_timeout: must be more than 0 seconds"),
    ],
)
def test_each_bad_field_is_named(fields, message):
    with pytest.raises(InvalidGang) as raised:
        Gang(**{"size": 4, "topology": "rack", **fields})
    assert str(raised.value).startswith(message)
    assert isinstance(raised.value, ValueError)


def test_the_cap_is_the_servers():
    assert Gang(size=DEFAULT_MAX_SIZE, topology="rack").size == 256
    assert Gang(size=1024, topology="rack", max_size=1024).size == 1024
    with pytest.raises(InvalidGang, match="Gang.size: 64 is more than the server's cap on gang size, 32"):
        Gang.from_dict({"size": 64, "topology": "rack"}, max_size=32)


def test_label_keys_as_kubernetes_spells_them():
    for key in ("rack", "zone", "topology.kubernetes.io/zone", "nvidia.com/gpu.clique", "flux.gpu/model", "a_b.c-d"):
        assert label_key_problem(key) is None, key
    for key in ("", "/rack", "rack/", "a b", "UPPER.example/rack", "rack_", 7):
        assert label_key_problem(key) is not None, key


def test_the_json_form():
    gang = Gang(size=16, topology="rack", prefer="zone", per_worker=8, start_timeout="90s")
    assert gang.to_dict() == {"size": 16, "topology": "rack", "prefer": "zone", "per_worker": 8, "start_timeout": 90.0}
    assert Gang.from_dict(gang.to_dict()) == gang
    assert "prefer" not in Gang(size=2, topology="rack").to_dict()
    with pytest.raises(InvalidGang, match="Gang got unknown field\\(s\\) 'ranks'; fields are size, topology"):
        Gang.from_dict({"size": 2, "topology": "rack", "ranks": 2})
    with pytest.raises(InvalidGang, match="Gang: expected a mapping"):
        Gang.from_dict([("size", 2)])  # type: ignore[arg-type]


def test_a_runs_size_keeps_per_worker_within_it():
    gang = Gang(size=16, topology="rack", per_worker=8)
    assert gang.with_size(4) == Gang(size=4, topology="rack", per_worker=4)
    assert gang.with_size(32).per_worker == 8
    with pytest.raises(InvalidGang, match="Gang.size: must be at least 2"):
        gang.with_size(1)


def test_workers_needed():
    assert Gang(size=4, topology="rack").workers_needed == 4
    assert Gang(size=9, topology="rack", per_worker=8).workers_needed == 2


@given(
    size=st.integers(2, DEFAULT_MAX_SIZE),
    per_worker=st.integers(1, DEFAULT_MAX_SIZE),
    prefer=st.sampled_from([None, "zone", "topology.kubernetes.io/zone"]),
    timeout=st.floats(0.001, 1e9),
)
def test_the_json_form_round_trips(size, per_worker, prefer, timeout):
    gang = Gang(size=size, topology="rack", prefer=prefer, per_worker=min(per_worker, size), start_timeout=timeout)
    assert Gang.from_dict(gang.to_dict()) == gang
