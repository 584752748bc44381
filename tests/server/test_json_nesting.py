"""The edge's nesting proof (``nests_within``, flux/server/request_limits.py) agrees with a parse:
for any JSON text it tries, it says "within" exactly when every container nests less
deep than the limit, and no text makes it slow."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.server.request_limits import json_problem, nests_within

LIMIT = 4
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**62), 2**62)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab"\\[]{}\n\u00e9'), max_size=6)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet=st.sampled_from('k"\\[]{}'), max_size=3), inner, max_size=4)
    ),
    max_leaves=40,
)


def levels(value: object) -> int:
    """Container levels: a scalar 0, ``[]`` 1, ``[[1]]`` 2."""
    if isinstance(value, dict):
        return 1 + max((levels(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((levels(v) for v in value), default=0)
    return 0


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_proof_agrees_with_a_parse(value):
    text = json.dumps(value)
    assert nests_within(text, LIMIT) == (levels(value) <= LIMIT)
    # and the edge refuses exactly what is too deep
    problem = json_problem(text.encode(), LIMIT)
    assert (problem is not None) == (levels(value) > LIMIT)


def test_a_registration_sized_body_needs_no_parse():
    body = {"packages": [{"name": f"p{i}", "version": "1.0"} for i in range(120)], "labels": {"a": "[{"}}
    assert nests_within(json.dumps(body), 64)


@pytest.mark.timeout(60)
def test_hostile_texts_get_the_right_answer_within_the_timeout():
    """Unterminated strings full of escaped quotes, deep or wide brackets at 4 MB: each
    gets the right answer before the test's timeout (a backtracking string pattern took
    minutes here; a proof over millions of brackets is not tried, the body is parsed)."""
    size = 4 * 1024**2
    hostile = [
        '"' + '\\"' * (size // 2),
        '\\"' * (size // 2) + "\\",
        "[" * size,
        "[]" * (size // 2),
        ("[" * 63 + "]" * 63) * (size // 126),
        '["' + "x" * size,
    ]
    # at most 64 brackets (the strings hold the rest): proven at once; far more: False, "parse to know"
    assert [nests_within(text, 64) for text in hostile] == [True, True, False, False, False, True]
    # and the parse that follows a False refuses only the text that is too deep
    assert [problem.msg if (problem := json_problem(text.encode(), 64)) else None for text in hostile[2:5]] == [
        "nested deeper than 64 levels",
        None,
        None,
    ]
