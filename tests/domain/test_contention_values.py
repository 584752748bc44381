"""The values of contention (docs/contention.md): priority classes, quotas, concurrency keys."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.domain.concurrency import Concurrency, MissingField, check_concurrency
from flux.domain.priority import Preemption, PriorityClasses, UnknownPriorityClass, check_priority, parse_class
from flux.domain.quotas import Quota
from flux.domain.resource_request import InvalidResourceRequest


def test_classes_resolve_names_and_integers_and_the_default():
    classes = PriorityClasses().with_overrides([parse_class("urgent=500:never"), parse_class("low=-5")])
    assert classes.resolve("urgent").value == 500 and classes.resolve("urgent").preemption is Preemption.NEVER
    assert (classes.resolve(None).value, classes.resolve(None).name) == (0, "default")
    assert classes.resolve(-5).name == "low" and classes.resolve(7).name is None
    assert classes.resolve("100").name == "high"
    with pytest.raises(UnknownPriorityClass, match="unknown priority class 'nope'.*critical \\(1000\\)"):
        classes.resolve("nope")


@pytest.mark.parametrize("text", ["x", "x=", "x=1.5", "x=1:sometimes", "bad name=1", "x=99999999999"])
def test_a_malformed_class_is_refused_with_what_is_wrong(text):
    with pytest.raises(ValueError):
        parse_class(text)


@pytest.mark.parametrize("value", [True, 1.5, 10**10, "no spaces", [], ""])
def test_a_bad_priority_names_its_owner(value):
    with pytest.raises(ValueError, match="workflow 'w'"):
        check_priority(value, "workflow 'w'")


def test_quotas_parse_units_and_custom_resources_and_round_trip():
    quota = Quota.parse(
        ["cpu=500m", "memory=64Gi", "gpu=4", "executions=100", "resources.fpga=2", "resources.licence=1"]
    )
    assert quota.to_json() == {"cpu": 0.5, "fpga": 2, "gpu": 4, "licence": 1, "memory": 64 * 1024**3, "executions": 100}
    assert Quota.from_json(quota.to_json()) == quota
    assert Quota.parse(["gpu=1.5"]).to_json() == {"gpu": 1.5}  # shares count as their fraction of a card
    bad_values = (["cpu"], ["gpu=-1"], ["gpu=abc"], ["memory=lots"], ["executions=-1"], ["executions=1.5"])
    for bad in (*bad_values, ["BAD=1"], ["licence=1"]):
        with pytest.raises(InvalidResourceRequest):
            Quota.parse(bad)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.one_of(st.integers(), st.text(max_size=5)), max_size=3))
def test_a_key_renders_every_field_or_names_the_one_missing(data):
    limit = Concurrency("k:{input.a}/{input.b}", 2)
    if "a" in data and "b" in data:
        rendered = limit.render(data)
        assert rendered.startswith("k:") and "/" in rendered
    else:
        with pytest.raises(MissingField, match="input.(a|b)"):
            limit.render(data)


@pytest.mark.parametrize("key", ["{input.a", "x}", "{os.system}", "{input.__class__}x{", ""])
def test_a_malformed_key_template_is_refused(key):
    with pytest.raises(ValueError):
        check_concurrency({"key": key, "limit": 1}, "workflow 'w'")


def test_keys_render_lists_by_index_and_non_strings_as_json():
    assert Concurrency("c:{input.items.1}:{input.n}").render({"items": ["a", "b"], "n": {"x": 1}}) == 'c:b:{"x":1}'
