"""flux-core's routing policy language (what its users import from ``flux.routing``),
translated to ours where it maps and refused, naming the construct, where it does not
(docs/migrating-from-flux-core.md). Ours is ``flux.domain.routing``'s ``score(...)``.

* ``require(label(k) == v, label(k) != v, ...)`` is an ``affinity``: ``{k: v}``, ``{k: NotIn(v)}``.
* ``score(prefer(label(k) == v, weight=w), least(load()), most(metric(m)))`` is a
  ``score(...)``: ``(label(k) == v) * w``, ``load() * -1``, ``metric(m) * 1``
  (``prefer(label(k) != v)`` is ``(label(k) == v) * -w``: it ranks the same).
* What reads the execution's input at dispatch (``input``, ``label_for``, ``when``,
  ``optional``), the worker's metadata and resources (``meta``, ``resource``,
  ``utilization``), ``sticky`` and ``service`` have no counterpart: they build an
  ``Unmapped`` value naming them. A local run ignores it (as flux-core's inline runs
  ignore affinity) with a ``MigrationWarning``; registering the workflow on a server is
  refused with its names (``flux.registration.static``).

Pure: the decorator and the static reader (``flux.registration``) both call these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flux.domain import routing as ours
from flux.domain.affinity import NotIn
from flux.domain.routing import RoutingPolicy, Term

__all__ = [
    "input",
    "label",
    "label_for",
    "least",
    "load",
    "meta",
    "meta_for",
    "metric",
    "most",
    "optional",
    "prefer",
    "require",
    "resource",
    "routing_input",
    "score",
    "service",
    "sticky",
    "utilization",
    "when",
]

GUIDE = "docs/migrating-from-flux-core.md#routing"


@dataclass(frozen=True)
class Selector:
    """A worker attribute: ``label(key)``, ``metric(key)`` or ``load()``."""

    kind: str
    key: str | None = None

    def __eq__(self, value: object) -> "Condition":  # type: ignore[override]
        return Condition(self, "==", value)

    def __ne__(self, value: object) -> "Condition":  # type: ignore[override]
        return Condition(self, "!=", value)

    def __hash__(self) -> int:
        return hash((self.kind, self.key))

    def term(self) -> Term:
        if self.kind == "metric":
            return ours.metric(self.key or "")
        if self.kind == "load":
            return ours.load()
        raise ValueError(
            f"flux.routing: least/most of label({self.key!r}) has no counterpart; rank by metric() or load() ({GUIDE})"
        )


@dataclass(frozen=True)
class Condition:
    """``selector == value`` or ``selector != value``."""

    selector: Selector
    op: str
    value: Any

    def label_equals(self) -> Term:
        if self.selector.kind != "label":
            raise ValueError(
                f"flux.routing: a condition on {self.selector.kind}() has no counterpart; "
                f"only label(key) == value maps ({GUIDE})"
            )
        if not isinstance(self.value, (str, int, float, bool)):
            raise ValueError(
                f"flux.routing: label({self.selector.key!r}) compared with {self.value!r}; "
                f"only a fixed value maps ({GUIDE})"
            )
        return ours.label(self.selector.key or "") == str(self.value)


def label(key: str) -> Selector:
    return Selector("label", key)


def metric(key: str) -> Selector:
    return Selector("metric", key)


def load() -> Selector:
    return Selector("load")


def prefer(condition: Condition, *, weight: float = 1.0) -> Term | "Unmapped":
    if unmapped := _unmapped(condition):
        return unmapped
    term = _condition(condition, "prefer").label_equals()
    return term * (weight if condition.op == "==" else -weight)


def least(selector: Selector, *, weight: float = 1.0) -> Term | "Unmapped":
    return _unmapped(selector) or _selector(selector, "least").term() * -weight


def most(selector: Selector, *, weight: float = 1.0) -> Term | "Unmapped":
    return _unmapped(selector) or _selector(selector, "most").term() * weight


def score(*terms: Term) -> RoutingPolicy | "Unmapped":
    return _unmapped(*terms) or ours.score(*terms)


def require(*conditions: Condition) -> dict[str, Any] | "Unmapped":
    """The hard filter as an ``affinity`` dict: one condition per label key."""
    if unmapped := _unmapped(*conditions):
        return unmapped
    affinity: dict[str, Any] = {}
    for condition in conditions:
        term = _condition(condition, "require").label_equals()
        key = condition.selector.key or ""
        if key in affinity:
            raise ValueError(
                f"flux.routing.require: two conditions on label {key!r}; an affinity has one per key ({GUIDE})"
            )
        affinity[key] = term.value if condition.op == "==" else NotIn(term.value)
    return affinity


@dataclass(frozen=True)
class Unmapped:
    """A policy, term or condition built from constructs without a counterpart here."""

    constructs: tuple[str, ...]

    def __eq__(self, value: object) -> "Unmapped":  # type: ignore[override]
        return _unmapped(self, value) or self

    def __ne__(self, value: object) -> "Unmapped":  # type: ignore[override]
        return _unmapped(self, value) or self

    def __hash__(self) -> int:
        return hash(self.constructs)

    def __mul__(self, weight: object) -> "Unmapped":
        return self

    __rmul__ = __mul__

    def message(self) -> str:
        names = ", ".join(f"flux.routing.{name}()" for name in self.constructs)
        return f"{names}: no counterpart in this engine: {_STATIC}, from labels, metrics and load ({GUIDE})"


def _unmapped(*values: Any) -> Unmapped | None:
    """The constructs without counterpart among ``values`` (conditions and their operands)."""
    names: list[str] = []
    for value in values:
        if isinstance(value, Condition):
            value = _unmapped(value.selector, value.value)
        if isinstance(value, Unmapped):
            names.extend(name for name in value.constructs if name not in names)
    return Unmapped(tuple(names)) if names else None


def _condition(value: Any, where: str) -> Condition:
    if not isinstance(value, Condition):
        raise ValueError(f"flux.routing.{where} takes label(key) == value or != value, got {value!r} ({GUIDE})")
    return value


def _selector(value: Any, where: str) -> Selector:
    if not isinstance(value, Selector):
        raise ValueError(f"flux.routing.{where} takes metric(key) or load(), got {value!r} ({GUIDE})")
    return value


def _unmapped_construct(construct: str) -> Any:
    def build(*args: Any, **kwargs: Any) -> Unmapped:
        inner = _unmapped(*args, *kwargs.values())
        return Unmapped((construct, *(name for name in (inner.constructs if inner else ()) if name != construct)))

    build.__name__ = construct
    return build


_STATIC = "routing and affinity are fixed at registration here, not resolved from each execution's input"
input = _unmapped_construct("input")  # noqa: A001 - flux-core's name
routing_input = _unmapped_construct("routing_input")
label_for = _unmapped_construct("label_for")
meta_for = _unmapped_construct("meta_for")
optional = _unmapped_construct("optional")
when = _unmapped_construct("when")
meta = _unmapped_construct("meta")
resource = _unmapped_construct("resource")
utilization = _unmapped_construct("utilization")
sticky = _unmapped_construct("sticky")
service = _unmapped_construct("service")
