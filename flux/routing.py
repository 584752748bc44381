"""flux-core's ``flux.routing`` policy language, translated to ours where it maps and
refused, naming the construct, where it does not (docs/migrating-from-flux-core.md).

* ``require(label(k) == v, label(k) != v, ...)`` is an ``affinity``: ``{k: v}``, ``{k: NotIn(v)}``.
* ``score(prefer(label(k) == v, weight=w), least(load()), most(metric(m)))`` is a
  ``score(...)``: ``(label(k) == v) * w``, ``load() * -1``, ``metric(m) * 1``
  (``prefer(label(k) != v)`` is ``(label(k) == v) * -w``: it ranks the same).
* What reads the execution's input at dispatch (``input``, ``label_for``, ``when``,
  ``optional``), the worker's metadata and resources (``meta``, ``resource``,
  ``utilization``), ``sticky`` and ``service`` have no counterpart: they raise
  ``ValueError`` when called, so the module stops at import with the name of what to change.

Pure: the decorator and the static reader (``flux.registration``) both call these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flux.domain import routing as ours
from flux.domain.affinity import NotIn
from flux.domain.routing import RoutingPolicy, Term

__all__ = [
    "input", "label", "label_for", "least", "load", "meta", "meta_for", "metric", "most", "optional", "prefer", "require",
    "resource", "routing_input", "score", "service", "sticky", "utilization", "when",
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
        raise ValueError(f"flux.routing: least/most of label({self.key!r}) has no counterpart; rank by metric() or load() ({GUIDE})")


@dataclass(frozen=True)
class Condition:
    """``selector == value`` or ``selector != value``."""

    selector: Selector
    op: str
    value: Any

    def label_equals(self) -> Term:
        if self.selector.kind != "label":
            raise ValueError(f"flux.routing: a condition on {self.selector.kind}() has no counterpart; only label(key) == value maps ({GUIDE})")
        if not isinstance(self.value, (str, int, float, bool)):
            raise ValueError(f"flux.routing: label({self.selector.key!r}) compared with {self.value!r}; only a fixed value maps ({GUIDE})")
        return ours.label(self.selector.key or "") == str(self.value)


def label(key: str) -> Selector:
    return Selector("label", key)


def metric(key: str) -> Selector:
    return Selector("metric", key)


def load() -> Selector:
    return Selector("load")


def prefer(condition: Condition, *, weight: float = 1.0) -> Term:
    term = _condition(condition, "prefer").label_equals()
    return term * (weight if condition.op == "==" else -weight)


def least(selector: Selector, *, weight: float = 1.0) -> Term:
    return _selector(selector, "least").term() * -weight


def most(selector: Selector, *, weight: float = 1.0) -> Term:
    return _selector(selector, "most").term() * weight


def score(*terms: Term) -> RoutingPolicy:
    return ours.score(*terms)


def require(*conditions: Condition) -> dict[str, Any]:
    """The hard filter as an ``affinity`` dict: one condition per label key."""
    affinity: dict[str, Any] = {}
    for condition in conditions:
        term = _condition(condition, "require").label_equals()
        key = condition.selector.key or ""
        if key in affinity:
            raise ValueError(f"flux.routing.require: two conditions on label {key!r}; an affinity has one per key ({GUIDE})")
        affinity[key] = term.value if condition.op == "==" else NotIn(term.value)
    return affinity


def _condition(value: Any, where: str) -> Condition:
    if not isinstance(value, Condition):
        raise ValueError(f"flux.routing.{where} takes label(key) == value or != value, got {value!r} ({GUIDE})")
    return value


def _selector(value: Any, where: str) -> Selector:
    if not isinstance(value, Selector):
        raise ValueError(f"flux.routing.{where} takes metric(key) or load(), got {value!r} ({GUIDE})")
    return value


def _refused(construct: str, instead: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ValueError(f"flux.routing.{construct}() has no counterpart in this engine: {instead} ({GUIDE})")

    refuse.__name__ = construct
    return refuse


_STATIC = "routing and affinity are fixed at registration here, not resolved from each execution's input"
input = _refused("input", _STATIC)  # noqa: A001 - flux-core's name
routing_input = _refused("routing_input", _STATIC)
label_for = _refused("label_for", _STATIC)
meta_for = _refused("meta_for", _STATIC)
optional = _refused("optional", _STATIC)
when = _refused("when", _STATIC)
meta = _refused("meta", "rank by a worker metric (metric(name)) or a label")
resource = _refused("resource", "resources are requests (ResourceRequest), not ranking terms")
utilization = _refused("utilization", "rank by metric('flux.cpu_percent') or load()")
sticky = _refused("sticky", "a workflow has no worker it sticks to here")
service = _refused("service", "services are flux-core's; there is none here")
