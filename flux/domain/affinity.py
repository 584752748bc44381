"""Label affinity: hard conditions on worker labels, as Kubernetes node affinity offers.

A workflow's ``affinity`` maps a label key to what the worker's label must be::

    affinity={
        "region": "us-east-1",              # equality (a plain value)
        "zone": In("a", "b"),               # the label is one of these values
        "tier": NotIn("spot"),              # the label is none of these (or absent)
        "ssd": Exists(),                    # the label is present, any value
        "legacy": DoesNotExist(),           # the label is absent
        "cuda": Gt(11),                     # the label, read as a number, is > 11
        "gpu_gen": Lt(9),                   # ... or < 9
        "flux.gpu/compute-capability": ">=8.0",  # ... or >= 8.0 (Ge(8.0); "<=", ">", "<" too)
    }

Every entry must hold (they are ANDed). Semantics follow Kubernetes: ``NotIn`` and
``DoesNotExist`` are satisfied by a worker that lacks the label; ``In``, ``Exists``,
``Gt`` and ``Lt`` need it. ``Gt``/``Lt`` are strict (``Ge``/``Le`` are not, beyond
Kubernetes, for versions such as a compute capability) and read the label as a decimal
number (``12``, ``-3``, ``11.8``, ``1e3``; no spaces, ``inf``, ``nan`` or ``_``); a label
that is not such a number fails the match. Values are compared as strings otherwise,
so ``In(0, 1)`` matches the label ``"0"``.

JSON form (what the client sends, the server stores and the dispatcher matches): a
plain string means equality; an operator is a dict::

    {"op": "In", "values": ["a", "b"]}      {"op": "NotIn", "values": ["spot"]}
    {"op": "Exists"}                        {"op": "DoesNotExist"}
    {"op": "Gt", "value": 11}               {"op": "Lt", "value": 9.5}
    {"op": "Ge", "value": 8.0}              {"op": "Le", "value": 9}

A string that is a comparison with a number (``">=8.0"``, ``"<9"``) is that operator, not
equality: its JSON form is the operator's.

Operator objects only record their arguments; they are validated by
``normalise_affinity`` when the workflow is decorated (and again by the server on
registration, with the same function), so an error names the workflow, the label key
and the bad value. In the normalised form ``In``/``NotIn`` values are strings in the
order given, without duplicates (a single list, tuple or set argument is unpacked:
``In(["a", "b"])`` is ``In("a", "b")``; a set is sorted), and ``Gt``/``Lt`` values are
the int or float given (never a string or a bool).

Matching lives in ``flux.scheduling.filters.affinity.check_affinity``, which takes the JSON
form directly; ``affinity_from_json`` turns that form back into operator objects.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, ClassVar, Mapping

from flux.domain import labels
from flux.domain.numbers import is_number

__all__ = [
    "DoesNotExist",
    "Exists",
    "Ge",
    "Gt",
    "In",
    "Le",
    "Lt",
    "NotIn",
    "OPERATORS",
    "Operator",
    "affinity_from_json",
    "affinity_key",
    "canonical_operator",
    "label_mismatch",
    "normalise_affinity",
]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Ge", "Le")
_FIELDS = {
    "In": "values",
    "NotIn": "values",
    "Exists": None,
    "DoesNotExist": None,
    "Gt": "value",
    "Lt": "value",
    "Ge": "value",
    "Le": "value",
}
#: The comparisons a plain string may spell, longest first: ">=8.0" is Ge(8.0).
_SPELLED = {">=": "Ge", "<=": "Le", ">": "Gt", "<": "Lt"}
_SYMBOLS = {"Gt": ">", "Lt": "<", "Ge": ">=", "Le": "<="}
_COMPARISON = re.compile(r"\s*(>=|<=|>|<)\s*(\S+)\s*")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


def _label_value(value: Any) -> str | None:
    """A string/int/float as the label string it must equal; ``None`` if it is not one."""
    if isinstance(value, str):
        return value
    if is_number(value):
        return str(value)
    return None


def format_number(value: int | float) -> str:
    """``12`` for 12 and 12.0, ``11.5`` for 11.5: how numbers appear in messages."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def parse_label_number(text: str) -> int | float | None:
    """The label as a number for ``Gt``/``Lt``, or ``None`` when it is not a plain decimal."""
    if _INTEGER.fullmatch(text):
        return int(text)
    if _NUMBER.fullmatch(text):
        return float(text)
    return None


def canonical_operator(spec: Any) -> dict:
    """Validate an operator's JSON form and return it normalised; ``ValueError`` says what is wrong.

    The message names the operator and the bad value, not the owner or key (the
    caller adds those).
    """
    if not isinstance(spec, Mapping):
        raise ValueError(f"an operator must be a dict with an 'op', got {spec!r}")
    op = spec.get("op")
    if op not in _FIELDS:
        raise ValueError(f"unknown operator {op!r} (use one of {', '.join(OPERATORS)}; a plain string means equality)")
    field = _FIELDS[op]
    extra = sorted(set(spec) - {"op", field} if field else set(spec) - {"op"}, key=str)
    if extra:
        allowed = f"'op' and {field!r}" if field else "only 'op'"
        raise ValueError(f"{op} takes {allowed}, got unexpected {', '.join(map(repr, extra))} in {dict(spec)!r}")
    if field is None:
        return {"op": op}
    if field not in spec:
        raise ValueError(f"{op} needs {field!r}, got {dict(spec)!r}")
    raw = spec[field]
    if field == "value":
        if not is_number(raw) or not math.isfinite(raw):
            raise ValueError(f"{op} needs a finite number, got {raw!r}")
        return {"op": op, "value": raw}
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        raise ValueError(f"{op} needs a list of values, got {raw!r}")
    problem = labels.count_problem(len(raw), f"{op} values", labels.MAX_VALUES)
    if problem:
        raise ValueError(problem)
    values: list[str] = []
    for item in raw:
        text = _label_value(item)
        if text is None:
            raise ValueError(f"{op} values must be strings or numbers, got {item!r}")
        problem = labels.value_problem(text)
        if problem:
            raise ValueError(f"{op}: {problem}")
        if text not in values:
            values.append(text)
    if not values:
        raise ValueError(f"{op} needs at least one value, got none")
    return {"op": op, "values": values}


class Operator:
    """A condition on one label; build with ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``.

    The object records its arguments as given; ``to_json`` validates and normalises
    them (raising ``ValueError``), so invalid operators are reported by
    ``normalise_affinity`` with the workflow and key that used them.
    Operators compare and hash by their JSON form.
    """

    op: ClassVar[str]
    __slots__ = ("_raw",)

    def __init__(self, raw: dict) -> None:
        self._raw = raw

    def to_json(self) -> dict:
        return canonical_operator(self._raw)

    def _identity(self) -> str:
        try:
            return json.dumps(self.to_json(), sort_keys=True)
        except ValueError:
            return repr(self._raw)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Operator):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        field = _FIELDS[self.op]
        if field is None:
            return f"{self.op}()"
        if field == "value":
            return f"{self.op}({self._raw['value']!r})"
        return f"{self.op}({', '.join(map(repr, self._raw['values']))})"


def _unpack(values: tuple) -> list:
    if len(values) == 1 and isinstance(values[0], (list, tuple, set, frozenset)):
        only = values[0]
        return sorted(only, key=str) if isinstance(only, (set, frozenset)) else list(only)
    return list(values)


class In(Operator):
    """The label is present and equals one of ``values`` (compared as strings)."""

    op = "In"
    __slots__ = ()

    def __init__(self, *values: str | int | float) -> None:
        super().__init__({"op": "In", "values": _unpack(values)})


class NotIn(Operator):
    """The label is absent, or equals none of ``values`` (Kubernetes semantics)."""

    op = "NotIn"
    __slots__ = ()

    def __init__(self, *values: str | int | float) -> None:
        super().__init__({"op": "NotIn", "values": _unpack(values)})


class Exists(Operator):
    """The label is present, whatever its value."""

    op = "Exists"
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__({"op": "Exists"})


class DoesNotExist(Operator):
    """The label is absent."""

    op = "DoesNotExist"
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__({"op": "DoesNotExist"})


class Gt(Operator):
    """The label, read as a decimal number, is strictly greater than ``value``."""

    op = "Gt"
    __slots__ = ()

    def __init__(self, value: int | float) -> None:
        super().__init__({"op": "Gt", "value": value})


class Lt(Operator):
    """The label, read as a decimal number, is strictly less than ``value``."""

    op = "Lt"
    __slots__ = ()

    def __init__(self, value: int | float) -> None:
        super().__init__({"op": "Lt", "value": value})


class Ge(Operator):
    """The label, read as a decimal number, is at least ``value`` (``">=8.0"``)."""

    op = "Ge"
    __slots__ = ()

    def __init__(self, value: int | float) -> None:
        super().__init__({"op": "Ge", "value": value})


class Le(Operator):
    """The label, read as a decimal number, is at most ``value`` (``"<=9"``)."""

    op = "Le"
    __slots__ = ()

    def __init__(self, value: int | float) -> None:
        super().__init__({"op": "Le", "value": value})


_CLASSES: dict[str, type[Operator]] = {cls.op: cls for cls in (In, NotIn, Exists, DoesNotExist, Gt, Lt, Ge, Le)}


def spelled_comparison(text: str) -> dict | None:
    """``">=8.0"`` as ``{"op": "Ge", "value": 8.0}``; None when ``text`` is not a comparison
    with a decimal number (then it is a value to equal)."""
    match = _COMPARISON.fullmatch(text)
    if match is None:
        return None
    number = parse_label_number(match.group(2))
    return None if number is None else {"op": _SPELLED[match.group(1)], "value": number}


def _listing(values: list) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def label_mismatch(key: str, wanted: Any, labels: Mapping[str, Any]) -> str | None:
    """Why ``labels`` fail the affinity entry ``key: wanted`` (a message), or ``None``.

    ``wanted`` is the JSON form: a string (or number) for equality, or an operator
    dict. A malformed dict never matches (its message says so) rather than raising,
    so one bad stored row cannot stop a dispatch round.
    """
    present = key in labels
    label = str(labels[key]) if present else None
    if not isinstance(wanted, dict) and not isinstance(wanted, Mapping):  # dicts (operators too) skip the ABC check
        if isinstance(wanted, Operator):
            wanted = wanted.to_json()
        else:
            if not present:
                return f"label {key} missing, wanted {wanted}"
            return None if label == str(wanted) else f"label {key}={label}, wanted {wanted}"
    op = wanted.get("op")
    if op == "In" or op == "NotIn":
        values = wanted.get("values")
        if not isinstance(values, (list, tuple)):
            return f"label {key}: invalid affinity {dict(wanted)!r}"
        if op == "In":
            if not present:
                return f"label {key} missing, wanted one of {_listing(values)}"
            if any(label == str(v) for v in values):
                return None
            return f"label {key}={label}, wanted one of {_listing(values)}"
        if present and any(label == str(v) for v in values):
            return f"label {key}={label}, wanted not one of {_listing(values)}"
        return None
    if op == "Exists":
        return None if present else f"label {key} missing, wanted it to exist"
    if op == "DoesNotExist":
        return f"label {key}={label}, wanted it absent" if present else None
    if op in _SYMBOLS:
        bound = wanted.get("value")
        if not is_number(bound):
            return f"label {key}: invalid affinity {dict(wanted)!r}"
        want = f"wanted {_SYMBOLS[op]} {format_number(bound)}"
        if not present:
            return f"label {key} missing, {want}"
        number = parse_label_number(label)
        if number is None:
            return f"label {key}={label} is not a number, {want}"
        if _holds(op, number, bound):
            return None
        return f"label {key}={label}, {want}"
    return f"label {key}: invalid affinity {dict(wanted)!r}"


def _holds(op: str, number: int | float, bound: int | float) -> bool:
    if op == "Gt":
        return number > bound
    if op == "Lt":
        return number < bound
    return number >= bound if op == "Ge" else number <= bound


def normalise_affinity(value: Any, owner: str) -> dict[str, str | dict] | None:
    """Validate an affinity and return its JSON form (``None`` when empty).

    Accepts a mapping of non-empty string keys to: a string, int or float (equality,
    stored as a string), an operator object, or an operator's JSON dict (so the server
    re-validates API payloads with this same function). ``ValueError`` names ``owner``
    (e.g. ``"workflow 'train'"``), the key and the bad value.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"{owner}: affinity must be a mapping of label to value, got {value!r}")
    problem = labels.count_problem(len(value), "affinity")
    if problem:
        raise ValueError(f"{owner}: {problem}")
    result: dict[str, str | dict] = {}
    for key, wanted in value.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{owner}: affinity key must be a non-empty string, got {key!r}")
        text = _label_value(wanted)
        problem = labels.key_problem(key) or (labels.value_problem(text) if text is not None else None)
        if problem:
            raise ValueError(f"{owner}: affinity: {problem}")
        if text is not None:
            spelled = spelled_comparison(text) if isinstance(wanted, str) else None
            result[key] = text if spelled is None else spelled
            continue
        if isinstance(wanted, Operator):
            wanted = wanted._raw
        elif not isinstance(wanted, Mapping):
            raise ValueError(
                f"{owner}: affinity[{key!r}] must be a string, a number or an operator "
                f"({', '.join(OPERATORS)}), got {wanted!r}"
            )
        try:
            result[key] = canonical_operator(wanted)
        except ValueError as exc:
            raise ValueError(f"{owner}: affinity[{key!r}]: {exc}") from None
    return result or None


def affinity_from_json(affinity: Mapping[str, Any] | None) -> dict[str, str | Operator]:
    """The JSON form back as strings and operator objects (validated; hashable values)."""
    result: dict[str, str | Operator] = {}
    for key, wanted in (normalise_affinity(affinity, "affinity") or {}).items():
        if isinstance(wanted, str):
            result[key] = wanted
        else:
            cls, field = _CLASSES[wanted["op"]], _FIELDS[wanted["op"]]
            if field is None:
                result[key] = cls()
            elif field == "value":
                result[key] = cls(wanted["value"])
            else:
                result[key] = cls(*wanted["values"])
    return result


def affinity_key(affinity: Mapping[str, Any] | None) -> tuple:
    """A hashable key for an affinity in JSON form: equal affinities get equal keys.

    Plain string values stay as they are (the common case costs no JSON encoding);
    operator dicts become a tagged JSON string, so they can never collide with a
    label value that happens to look like JSON.
    """
    if not affinity:
        return ()
    return tuple(sorted((key, _hashable(wanted)) for key, wanted in affinity.items()))


def _hashable(wanted: Any) -> str | tuple[str, str]:
    if isinstance(wanted, str):
        return wanted
    if isinstance(wanted, Operator):
        wanted = wanted.to_json()
    return ("json", json.dumps(wanted, sort_keys=True, default=repr))
