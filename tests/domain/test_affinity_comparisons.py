"""Ge and Le, and comparisons spelled as strings (">=8.0"): device labels such as a compute capability."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux import Ge, Gt, Le
from flux.domain.affinity import affinity_from_json, label_mismatch, normalise_affinity

KEY = "flux.gpu/compute-capability"


@pytest.mark.parametrize(
    ("spelled", "operator"),
    [
        (">=8.0", {"op": "Ge", "value": 8.0}),
        ("<= 9", {"op": "Le", "value": 9}),
        (">7.5", {"op": "Gt", "value": 7.5}),
        ("<10", {"op": "Lt", "value": 10}),
    ],
)
def test_a_comparison_spelled_as_a_string_is_that_operator(spelled, operator):
    assert normalise_affinity({KEY: spelled}, "w") == {KEY: operator}


@pytest.mark.parametrize("text", ["9.0", ">=", ">=abc", ">=1.2.3", "=>8", "a>=8"])
def test_anything_else_stays_equality(text):
    assert normalise_affinity({KEY: text}, "w") == {KEY: text}


def test_ge_and_le_include_the_bound_and_say_why_not():
    labels = {KEY: "8.0"}
    assert label_mismatch(KEY, Ge(8.0).to_json(), labels) is None
    assert label_mismatch(KEY, Le(8).to_json(), labels) is None
    assert label_mismatch(KEY, {"op": "Ge", "value": 8.6}, labels) == f"label {KEY}=8.0, wanted >= 8.6"
    assert label_mismatch(KEY, {"op": "Le", "value": 7}, {}) == f"label {KEY} missing, wanted <= 7"
    assert affinity_from_json({KEY: ">=8.0"}) == {KEY: Ge(8.0)}
    assert normalise_affinity({KEY: Gt(7.9)}, "w") == {KEY: {"op": "Gt", "value": 7.9}}


@given(label=st.integers(-50, 50) | st.floats(-50, 50, allow_nan=False), bound=st.integers(-50, 50))
def test_property_ge_and_le_agree_with_python_numbers(label, bound):
    labels = {KEY: repr(label)}
    assert (label_mismatch(KEY, {"op": "Ge", "value": bound}, labels) is None) == (label >= bound)
    assert (label_mismatch(KEY, {"op": "Le", "value": bound}, labels) is None) == (label <= bound)
