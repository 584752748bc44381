"""Resources as data and the allotment that holds them (pure values: properties)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flux.domain.allotment import EMPTY, Allotment
from flux.domain.resources import Resources

names = st.sampled_from(["cpu", "memory", "disk", "gpu", "fpga", "license.matlab"])
amounts = st.integers(min_value=0, max_value=2**40)
resources = st.dictionaries(names, amounts, max_size=6).map(Resources)


@given(resources, resources)
def test_adding_then_taking_away_gives_back_what_was_there(a, b):
    assert (a + b) - b == Resources({name: a.amount(name) for name in a.keys() | b.keys()})


@given(resources, resources)
def test_covers_exactly_when_no_asked_dimension_is_short(have, want):
    assert have.covers(want) == all(have.amount(name) >= wanted for name, wanted in want.items())
    assert (have + want).covers(want)


@given(resources)
def test_an_absent_dimension_is_zero_and_equal_values_hash_alike(a):
    assert a.amount("absent") == 0
    assert hash(Resources(dict(a))) == hash(a) and Resources(dict(a)) == a


@given(resources, st.lists(st.integers(min_value=0, max_value=7), max_size=4, unique=True))
def test_an_allotment_survives_its_json_form(quantities, gpus):
    allotment = Allotment(quantities.without(["gpu"]), tuple(gpus))
    assert Allotment.from_json(allotment.to_json()) == allotment
    assert allotment.quantities.amount("gpu") == len(gpus)


def test_the_json_form_is_the_one_the_api_shows():
    allotment = Allotment(Resources(cpu=2, memory=1024, fpga=1), (0, 3))
    assert allotment.to_json() == {"cpu": 2, "memory": 1024, "gpus": [0, 3], "resources": {"fpga": 1}}
    assert Allotment.from_json(None) is EMPTY and not EMPTY
    assert allotment.memory == 1024 and allotment.disk is None
