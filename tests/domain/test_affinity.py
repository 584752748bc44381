"""Affinity beyond equality: Kubernetes-style operators on worker labels (In, NotIn,
Exists, DoesNotExist, Gt, Lt), their JSON form, validation and mismatch messages.
Plain dicts keep meaning equality."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import flux
from flux import DoesNotExist, Exists, Gt, In, Lt, NotIn, workflow
from flux.domain.affinity import affinity_from_json, affinity_key, normalise_affinity
from flux.domain.resources import Resources
from flux.model.workflow import validate_affinity
from flux.scheduling.demand import Demand
from flux.scheduling.filters import Reason, check
from flux.scheduling.filters.affinity import check_affinity
from flux.scheduling.placement import place
from flux.scheduling.snapshot import WorkerView

OWNER = "workflow 'train'"


def mismatch(affinity, labels) -> str | None:
    """Check through the JSON form, as the dispatcher does."""
    result = check_affinity(normalise_affinity(affinity, OWNER), labels)
    return None if result is None else result.message


def worker(name: str = "w", labels=None, available=None, **overrides) -> WorkerView:
    """cpu 8, memory 32 GiB, disk 1 TiB, all available but what ``available`` says."""
    total = Resources(cpu=8.0, memory=2**35, disk=2**40)
    return WorkerView(
        name=name, labels=labels or {}, total=total, available=total.updated(available or {}), **overrides
    )


# --- each operator: matching, mismatching, messages -------------------------------------


def test_equality_messages_are_unchanged():
    assert mismatch({"region": "us-east-1"}, {"region": "us-east-1"}) is None
    assert mismatch({"region": "us-east-1"}, {"region": "eu-west-1"}) == "label region=eu-west-1, wanted us-east-1"
    assert mismatch({"region": "us-east-1"}, {}) == "label region missing, wanted us-east-1"


def test_in_matches_any_listed_value():
    affinity = {"region": In("us-east-1", "us-west-2")}
    assert mismatch(affinity, {"region": "us-east-1"}) is None
    assert mismatch(affinity, {"region": "us-west-2"}) is None
    assert mismatch(affinity, {"region": "eu-west-1"}) == "label region=eu-west-1, wanted one of [us-east-1, us-west-2]"
    assert mismatch(affinity, {}) == "label region missing, wanted one of [us-east-1, us-west-2]"


def test_not_in_rejects_listed_values_and_accepts_a_missing_label():
    affinity = {"tier": NotIn("spot")}
    assert mismatch(affinity, {"tier": "spot"}) == "label tier=spot, wanted not one of [spot]"
    assert mismatch(affinity, {"tier": "on-demand"}) is None
    assert mismatch(affinity, {}) is None  # Kubernetes: NotIn holds when the label is absent


def test_exists_and_does_not_exist():
    assert mismatch({"ssd": Exists()}, {"ssd": ""}) is None
    assert mismatch({"ssd": Exists()}, {"ssd": "true"}) is None
    assert mismatch({"ssd": Exists()}, {}) == "label ssd missing, wanted it to exist"
    assert mismatch({"legacy": DoesNotExist()}, {}) is None
    assert mismatch({"legacy": DoesNotExist()}, {"legacy": "true"}) == "label legacy=true, wanted it absent"


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ("13", None),
        ("12.5", None),
        ("1e2", None),
        ("12", "label cuda=12, wanted > 12"),
        ("11", "label cuda=11, wanted > 12"),
        ("-20", "label cuda=-20, wanted > 12"),
        ("abc", "label cuda=abc is not a number, wanted > 12"),
        ("12.x", "label cuda=12.x is not a number, wanted > 12"),
        (" 13", "label cuda= 13 is not a number, wanted > 12"),
        ("inf", "label cuda=inf is not a number, wanted > 12"),
        ("nan", "label cuda=nan is not a number, wanted > 12"),
        ("1_000", "label cuda=1_000 is not a number, wanted > 12"),
        ("", "label cuda= is not a number, wanted > 12"),
    ],
)
def test_gt_compares_the_label_as_a_number(label, message):
    assert mismatch({"cuda": Gt(12)}, {"cuda": label}) == message


def test_gt_and_lt_are_strict_and_need_the_label():
    assert mismatch({"cuda": Lt(12)}, {"cuda": "11"}) is None
    assert mismatch({"cuda": Lt(12)}, {"cuda": "12"}) == "label cuda=12, wanted < 12"
    assert mismatch({"cuda": Lt(12)}, {"cuda": "abc"}) == "label cuda=abc is not a number, wanted < 12"
    assert mismatch({"cuda": Gt(12)}, {}) == "label cuda missing, wanted > 12"
    assert mismatch({"cuda": Lt(11.5)}, {"cuda": "11.4"}) is None
    assert mismatch({"cuda": Lt(11.5)}, {"cuda": "11.5"}) == "label cuda=11.5, wanted < 11.5"


def test_numeric_comparison_is_exact_for_big_integers():
    assert mismatch({"n": Gt(2**60)}, {"n": str(2**60 + 1)}) is None
    assert mismatch({"n": Gt(2**60)}, {"n": str(2**60)}) == f"label n={2**60}, wanted > {2**60}"


def test_in_compares_numbers_as_strings():
    assert mismatch({"gpu_index": In(0, 1)}, {"gpu_index": "1"}) is None
    assert normalise_affinity({"gpu_index": In(0, 1)}, OWNER) == {"gpu_index": {"op": "In", "values": ["0", "1"]}}


def test_every_entry_must_hold_and_the_first_failure_is_reported():
    affinity = {"region": In("us-east-1"), "ssd": Exists(), "cuda": Gt(11)}
    assert mismatch(affinity, {"region": "us-east-1", "ssd": "1", "cuda": "12"}) is None
    assert mismatch(affinity, {"region": "us-east-1", "cuda": "10"}) == "label ssd missing, wanted it to exist"


def test_check_affinity_accepts_operator_objects_and_json_dicts():
    labels = {"zone": "b"}
    assert check_affinity({"zone": In("a", "b")}, labels) is None
    assert check_affinity({"zone": {"op": "In", "values": ["a", "b"]}}, labels) is None
    assert check_affinity({"zone": NotIn("b")}, labels) == Reason(
        "affinity", "didn't match affinity", "label zone=b, wanted not one of [b]"
    )


def test_malformed_stored_operator_never_matches_and_does_not_raise():
    # Stored rows are validated on the way in; a bad one must not break a dispatch round.
    for bad in ({"op": "Near"}, {"op": "Gt", "value": "12"}, {"op": "In", "values": 3}, {}):
        result = check_affinity({"zone": bad}, {"zone": "12"})
        assert result is not None and result.filter == "affinity" and "invalid affinity" in result.message


def test_operators_are_checked_before_resources_and_route_placement():
    from flux.domain.resource_request import ResourceRequest

    spot = worker("spot", {"tier": "spot"}, available={"cpu": 1.0})
    assert check(ResourceRequest(cpu=4), {"tier": {"op": "NotIn", "values": ["spot"]}}, spot).filter == "affinity"
    on_demand = worker("on-demand", {"tier": "on-demand", "cuda": "12.2"}, registered_seq=1)
    affinity = normalise_affinity({"tier": NotIn("spot"), "cuda": Gt(12)}, OWNER)
    assert [p.worker_name for p in place([Demand("e1", None, affinity)], [spot, on_demand])] == ["on-demand"]
    assert place([Demand("e2", None, normalise_affinity({"cuda": Gt(13)}, OWNER))], [spot, on_demand]) == []


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        ({"cuda": Gt("12")}, "workflow 'train': affinity['cuda']: Gt needs a finite number, got '12'"),
        ({"cuda": Lt(float("nan"))}, "workflow 'train': affinity['cuda']: Lt needs a finite number, got nan"),
        ({"cuda": Gt(True)}, "workflow 'train': affinity['cuda']: Gt needs a finite number, got True"),
        ({"zone": In()}, "workflow 'train': affinity['zone']: In needs at least one value, got none"),
        (
            {"zone": NotIn("a", None)},
            "workflow 'train': affinity['zone']: NotIn values must be strings or numbers, got None",
        ),
        ({"zone": {"op": "Near", "value": 1}}, "workflow 'train': affinity['zone']: unknown operator 'Near'"),
        (
            {"zone": {"op": "In", "values": "ab"}},
            "workflow 'train': affinity['zone']: In needs a list of values, got 'ab'",
        ),
        ({"zone": {"op": "In"}}, "workflow 'train': affinity['zone']: In needs 'values'"),
        ({"ssd": {"op": "Exists", "value": 1}}, "workflow 'train': affinity['ssd']: Exists takes only 'op'"),
        ({"zone": {"values": ["a"]}}, "workflow 'train': affinity['zone']: unknown operator None"),
        ({"zone": None}, "workflow 'train': affinity['zone'] must be a string, a number or an operator"),
        ({"zone": True}, "workflow 'train': affinity['zone'] must be a string, a number or an operator"),
        ({"zone": ["a", "b"]}, "workflow 'train': affinity['zone'] must be a string, a number or an operator"),
        ({"": "a"}, "workflow 'train': affinity key must be a non-empty string"),
        (["zone"], "workflow 'train': affinity must be a mapping"),
    ],
)
def test_validation_errors_name_owner_key_and_bad_value(affinity, expected):
    with pytest.raises(ValueError) as error:
        normalise_affinity(affinity, OWNER)
    assert str(error.value).startswith(expected)


def test_invalid_operator_fails_at_decoration_naming_the_workflow():
    with pytest.raises(ValueError, match=r"workflow 'train': affinity\['cuda'\]: Gt needs a finite number, got 'x'"):

        @workflow.with_options(affinity={"cuda": Gt("x")})
        async def train(ctx): ...


def test_validate_affinity_in_flux_workflow_is_the_same_function():
    # flux.server.workflows re-validates API payloads with this name.
    assert validate_affinity({"zone": {"op": "In", "values": ["a", 1]}}, OWNER) == {
        "zone": {"op": "In", "values": ["a", "1"]}
    }
    assert validate_affinity({"zone": "a", "n": 1}, OWNER) == {"zone": "a", "n": "1"}
    assert validate_affinity({}, OWNER) is None and validate_affinity(None, OWNER) is None
    with pytest.raises(ValueError, match="workflow 'train'"):
        validate_affinity({"zone": {"op": "Gt", "value": "a"}}, OWNER)


# --- JSON form --------------------------------------------------------------------------


def test_json_forms():
    affinity = {
        "region": "us-east-1",
        "zone": In("a", "b", "a"),
        "tier": NotIn(["spot", "preemptible"]),
        "ssd": Exists(),
        "legacy": DoesNotExist(),
        "cuda": Gt(11),
        "gen": Lt(9.5),
        "rack": In({"r2", "r1"}),
        "index": 0,
    }
    assert normalise_affinity(affinity, OWNER) == {
        "region": "us-east-1",
        "zone": {"op": "In", "values": ["a", "b"]},
        "tier": {"op": "NotIn", "values": ["spot", "preemptible"]},
        "ssd": {"op": "Exists"},
        "legacy": {"op": "DoesNotExist"},
        "cuda": {"op": "Gt", "value": 11},
        "gen": {"op": "Lt", "value": 9.5},
        "rack": {"op": "In", "values": ["r1", "r2"]},
        "index": "0",
    }


def test_plain_dicts_keep_meaning_equality():
    assert normalise_affinity({"region": "us-east-1", "gpu": 1, "ratio": 0.5}, OWNER) == {
        "region": "us-east-1",
        "gpu": "1",
        "ratio": "0.5",
    }


def test_json_round_trip_and_operators_back():
    affinity = {
        "zone": In("a", "b"),
        "ssd": Exists(),
        "legacy": DoesNotExist(),
        "cuda": Gt(11),
        "gen": Lt(9.5),
        "r": "x",
    }
    stored = json.loads(json.dumps(normalise_affinity(affinity, OWNER)))
    assert normalise_affinity(stored, OWNER) == stored
    assert affinity_from_json(stored) == affinity
    assert {type(v).__name__ for v in affinity_from_json(stored).values()} == {
        "In",
        "Exists",
        "DoesNotExist",
        "Gt",
        "Lt",
        "str",
    }
    assert affinity_from_json(None) == {}


def test_operators_compare_and_hash_by_json_form():
    assert In("a", 1) == In(["a", "1"]) and hash(In("a", 1)) == hash(In("a", "1"))
    assert Gt(1) != Lt(1) and Exists() != DoesNotExist()
    assert repr(In("a", "b")) == "In('a', 'b')" and repr(Gt(12)) == "Gt(12)" and repr(Exists()) == "Exists()"


def test_affinity_key_is_hashable_and_distinguishes_operators_from_lookalike_strings():
    plain = {"zone": "a", "region": "x"}
    assert affinity_key(plain) == affinity_key({"region": "x", "zone": "a"})
    op = {"zone": {"op": "Exists"}}
    lookalike = {"zone": json.dumps({"op": "Exists"})}
    assert affinity_key(op) != affinity_key(lookalike)
    # usable as a dict key: equal affinities (an operator or its JSON form) land on one entry
    keyed = {affinity_key(op): "op", affinity_key(lookalike): "string"}
    assert keyed[affinity_key({"zone": Exists()})] == "op" and len(keyed) == 2
    assert hash(affinity_key(plain)) == hash(affinity_key({"region": "x", "zone": "a"}))
    assert affinity_key({"z": {"values": ["a"], "op": "In"}}) == affinity_key({"z": {"op": "In", "values": ["a"]}})
    assert affinity_key(None) == affinity_key({}) == ()


def test_operators_are_exported_from_flux():
    assert {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"} <= set(flux.__all__)


# --- properties ---------------------------------------------------------------------------

label_values = st.sampled_from(["a", "b", "c", "10", "11", "12", "11.5", "-3", "abc", ""])
labels_st = st.dictionaries(st.sampled_from(["zone", "cuda", "tier"]), label_values, max_size=3)
value_sets = st.lists(label_values, min_size=1, max_size=3)
numbers = st.integers(-20, 20) | st.floats(-20, 20, allow_nan=False)


@given(labels_st, value_sets)
def test_property_in_and_not_in_are_complements_when_the_label_is_present(labels, values):
    in_result = mismatch({"zone": In(*values)}, labels)
    not_in_result = mismatch({"zone": NotIn(*values)}, labels)
    if "zone" in labels:
        assert (in_result is None) != (not_in_result is None)
        assert (in_result is None) == (labels["zone"] in values)
    else:
        assert in_result is not None and not_in_result is None


@given(labels_st)
def test_property_exists_and_does_not_exist_are_complements(labels):
    assert (mismatch({"cuda": Exists()}, labels) is None) != (mismatch({"cuda": DoesNotExist()}, labels) is None)


@given(labels_st, numbers)
def test_property_gt_and_lt_agree_with_python_numbers(labels, bound):
    gt, lt = mismatch({"cuda": Gt(bound)}, labels), mismatch({"cuda": Lt(bound)}, labels)
    try:
        number = float(labels["cuda"])
    except (KeyError, ValueError):
        assert gt is not None and lt is not None
        return
    assert (gt is None) == (number > bound)
    assert (lt is None) == (number < bound)


entries = st.sampled_from(["a", 1, 2.5]) | value_sets.map(lambda v: In(*v)) | numbers.map(Gt) | st.just(Exists())


@given(st.dictionaries(st.sampled_from(["zone", "cuda", "tier"]), entries))
def test_property_normalising_is_idempotent_and_round_trips(affinity):
    once = normalise_affinity(affinity, OWNER)
    assert normalise_affinity(once, OWNER) == once
    assert normalise_affinity(json.loads(json.dumps(once)), OWNER) == once
    assert normalise_affinity(affinity_from_json(once), OWNER) == once


# Issue 31: caps as Kubernetes sets them for label selectors (flux/domain/labels.py).


@pytest.mark.parametrize(
    "affinity, message",
    [
        ({f"k{i}": "v" for i in range(65)}, "workflow 'w': affinity has 65 entries, at most 64"),
        ({"k" * 64: "v"}, "has a name of 64 characters, at most 63"),
        ({"a" * 254 + "/k": "v"}, "has a prefix of 254 characters, at most 253"),
        ({"zone": "v" * 64}, "label value 'vvvv"),
        (
            {"zone": {"op": "In", "values": [str(i) for i in range(65)]}},
            "affinity['zone']: In values has 65 entries, at most 64",
        ),
        ({"zone": {"op": "NotIn", "values": ["v" * 64]}}, "NotIn: label value"),
    ],
)
def test_affinity_is_capped_like_kubernetes_label_selectors(affinity, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        normalise_affinity(affinity, "workflow 'w'")


def test_the_largest_affinity_is_accepted():
    largest = {"p" * 253 + "/" + "k" * 61 + str(i % 10) + str(i // 10): "v" * 63 for i in range(64)}
    assert len(normalise_affinity(largest, "w")) == 64
    assert normalise_affinity({"zone": In(*range(64))}, "w")["zone"]["values"][-1] == "63"


def test_decorating_a_workflow_with_ten_thousand_labels_is_refused():
    with pytest.raises(ValueError, match=re.escape("affinity has 10000 entries, at most 64")):

        @workflow.with_options(affinity={f"k{i}": "v" for i in range(10_000)})
        async def crowded(ctx):  # pragma: no cover - never registered
            return None
