"""Dynamic routing: a declarative policy that ranks the workers a workflow may run on.

Requests and affinity decide which workers are *eligible* (hard). A routing policy
only decides which eligible worker with a free slot *wins* (soft): the one with the
highest score, ties broken by least load (``flux.scheduling.ranking.candidate_key``).
A policy therefore can never send work to a worker that fails the resource or
affinity check::

    from flux import label, load, metric, score, workflow

    @workflow.with_options(
        routing=score(
            (label("zone") == "a") * 10,       # 10 points for zone a
            metric("queue_depth") * -1,         # minus the worker's queue depth
            -metric("flux.cpu_percent"),        # a built-in metric, weight -1
            load() * -5,                        # minus 5 x running/max_concurrent_executions
        ),
    )
    async def ingest(ctx): ...

Terms, each with a weight (default 1, set by multiplying: ``term * w``, ``w * term``,
``-term``; weights multiply, so ``(term * 2) * 3`` weighs 6):

* ``label(key) == value`` is worth 1 when the worker's label ``key`` equals ``value``
  (compared as strings), else 0 (also when the label is missing). Only ``==`` exists;
  for "not equal" give the term a negative weight.
* ``metric(name)`` is worth the metric's current value, as published by the worker
  on its heartbeats (``WorkerView.metrics``). A metric the worker has not published,
  or whose value is not a finite number, is worth 0.0. Names starting with ``flux.``
  are reserved for the built-ins: ``flux.cpu_percent`` and ``flux.memory_percent``
  (0..100, computed by the worker from each heartbeat's sample) and ``flux.running`` (the worker's running
  executions, derived from the live slot count, never read from ``metrics``).
* ``load()`` is worth ``running / max_concurrent_executions`` (0.0 idle .. 1.0 full). With the default
  weight of +1 it *prefers* busy workers; you usually want ``load() * -k``.

A worker's score is the sum of ``weight * value`` over the terms
(``flux.scheduling.ranking.score_worker`` also explains it term by term).

JSON form, what ``RoutingPolicy.to_dict`` writes and ``RoutingPolicy.from_dict`` reads::

    {"terms": [{"kind": "label_eq", "key": "zone", "value": "a", "weight": 10},
               {"kind": "metric", "name": "queue_depth", "weight": -1},
               {"kind": "load", "weight": -5}]}

Weights are kept as the int or float given. ``from_dict`` defaults a missing
``weight`` to 1 and rejects unknown keys and kinds. Everything is validated when the
policy is built (``score(...)`` runs at decoration time; the server re-validates API
payloads with ``from_dict``): a non-term argument, a non-finite or non-numeric
weight, a bad label key or value, an unknown ``flux.`` metric, or an empty
``score()`` raise ``ValueError`` naming the term.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Mapping

from flux.domain import labels
from flux.domain.numbers import is_number

__all__ = [
    "BUILTIN_METRICS",
    "LabelEquals",
    "LabelRef",
    "LoadTerm",
    "MetricTerm",
    "RoutingPolicy",
    "Term",
    "label",
    "load",
    "metric",
    "score",
]

#: Metrics every worker has; ``flux.running`` is derived from the slot count.
BUILTIN_METRICS = ("flux.cpu_percent", "flux.memory_percent", "flux.running")
_METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-:/]{0,127}")


class Term:
    """One weighted term of a routing policy; build with ``label``, ``metric`` or ``load``."""

    kind: ClassVar[str]
    weight: int | float

    def __mul__(self, factor: Any) -> Term:
        if not is_number(factor):
            return NotImplemented
        return replace(self, weight=self.weight * factor)

    __rmul__ = __mul__

    def __neg__(self) -> Term:
        return replace(self, weight=-self.weight)

    def __bool__(self) -> bool:
        raise TypeError(f"{self!r} is a routing term, not a condition; pass it to score(...)")

    def to_dict(self) -> dict:
        raise NotImplementedError

    def _problem(self) -> str | None:
        """What is wrong with this term's own fields (not the weight), or ``None``."""
        return None

    def _normalised(self) -> Term:
        return self


@dataclass(frozen=True, eq=True)
class LabelEquals(Term):
    """Worth 1 when the worker's label ``key`` equals ``value`` (as strings), else 0."""

    kind: ClassVar[str] = "label_eq"
    key: str
    value: str
    weight: int | float = 1

    def to_dict(self) -> dict:
        return {"kind": self.kind, "key": self.key, "value": self.value, "weight": self.weight}

    def _problem(self) -> str | None:
        if not isinstance(self.key, str) or not self.key:
            return f"label key must be a non-empty string, got {self.key!r}"
        if not isinstance(self.value, str) and not is_number(self.value):
            return f"label {self.key} must be compared with a string or a number, got {self.value!r}"
        return labels.key_problem(self.key) or labels.value_problem(str(self.value))

    def _normalised(self) -> Term:
        return self if isinstance(self.value, str) else replace(self, value=str(self.value))

    def __repr__(self) -> str:
        return _weighted(f"(label({self.key!r}) == {self.value!r})", self.weight)


@dataclass(frozen=True, eq=True)
class MetricTerm(Term):
    """Worth the worker's metric ``name`` (0.0 when missing or not finite)."""

    kind: ClassVar[str] = "metric"
    name: str
    weight: int | float = 1

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "weight": self.weight}

    def _problem(self) -> str | None:
        if not isinstance(self.name, str) or not _METRIC_NAME.fullmatch(self.name):
            return (
                f"metric name must start with a letter or '_' and use letters, digits and _ . - : / "
                f"(at most 128 characters), got {self.name!r}"
            )
        if self.name.startswith("flux.") and self.name not in BUILTIN_METRICS:
            return f"unknown built-in metric {self.name!r} (built-ins: {', '.join(BUILTIN_METRICS)})"
        return None

    def __repr__(self) -> str:
        return _weighted(f"metric({self.name!r})", self.weight)


@dataclass(frozen=True, eq=True)
class LoadTerm(Term):
    """Worth the worker's load, ``running / max_concurrent_executions`` (1.0 for a worker with none)."""

    kind: ClassVar[str] = "load"
    weight: int | float = 1

    def to_dict(self) -> dict:
        return {"kind": self.kind, "weight": self.weight}

    def __repr__(self) -> str:
        return _weighted("load()", self.weight)


def _weighted(text: str, weight: Any) -> str:
    return text if weight == 1 and not isinstance(weight, bool) else f"{text} * {weight!r}"


class LabelRef:
    """``label(key)``: compare with ``==`` to get a term."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __eq__(self, value: Any) -> LabelEquals:  # type: ignore[override]
        return LabelEquals(self.key, value)

    def __ne__(self, value: Any) -> LabelEquals:  # type: ignore[override]
        raise TypeError(
            f"label({self.key!r}) != ... is not a routing term; "
            f"use (label({self.key!r}) == {value!r}) * -1 to penalise the value instead"
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"label({self.key!r})"


def label(key: str) -> LabelRef:
    """A worker label, for ``label(key) == value`` (worth 1 when equal, else 0)."""
    return LabelRef(key)


def metric(name: str) -> MetricTerm:
    """A live worker metric (heartbeat-published, or a ``flux.`` built-in), weight 1."""
    return MetricTerm(name)


def load() -> LoadTerm:
    """The worker's load, ``running / max_concurrent_executions``, weight 1 (use ``load() * -k`` to spread)."""
    return LoadTerm()


def _check_term(term: Any) -> Term:
    """The term, normalised; ``ValueError`` with what is wrong (without the term's position)."""
    if isinstance(term, LabelRef):
        raise ValueError(f"{term!r} needs a comparison, e.g. {term!r} == 'value'")
    if not isinstance(term, Term):
        raise ValueError(
            f"{term!r} is not a routing term (use label(key) == value, metric(name) or load(), "
            "optionally multiplied by a weight)"
        )
    if not is_number(term.weight) or not math.isfinite(term.weight):
        raise ValueError(f"{term!r}: weight must be a finite number, got {term.weight!r}")
    problem = term._problem()
    if problem:
        raise ValueError(f"{term!r}: {problem}")
    return term._normalised()


@dataclass(frozen=True)
class RoutingPolicy:
    """Weighted terms; a worker's score is the sum of ``weight * value``. Build with ``score``."""

    terms: tuple[Term, ...]

    def __post_init__(self) -> None:
        terms = self.terms
        if isinstance(terms, (Term, LabelRef)) or not isinstance(terms, (tuple, list)):
            terms = (terms,)
        if not terms:
            raise ValueError("score() needs at least one term, e.g. score(metric('queue_depth') * -1)")
        problem = labels.count_problem(len(terms), "score()")
        if problem:
            raise ValueError(problem)
        checked = []
        for position, term in enumerate(terms, start=1):
            try:
                checked.append(_check_term(term))
            except ValueError as exc:
                raise ValueError(f"score() term {position}: {exc}") from None
        object.__setattr__(self, "terms", tuple(checked))

    def to_dict(self) -> dict:
        return {"terms": [term.to_dict() for term in self.terms]}

    @classmethod
    def from_dict(cls, data: Any) -> RoutingPolicy:
        """Parse and validate the JSON form; ``ValueError`` names the bad term."""
        if not isinstance(data, Mapping) or set(data) != {"terms"}:
            raise ValueError(f"routing must be {{'terms': [...]}}, got {data!r}")
        raw = data["terms"]
        if not isinstance(raw, (list, tuple)):
            raise ValueError(f"routing terms must be a list, got {raw!r}")
        if not raw:
            raise ValueError("routing needs at least one term, got an empty list")
        problem = labels.count_problem(len(raw), "routing")
        if problem:
            raise ValueError(problem)
        terms = []
        for position, item in enumerate(raw, start=1):
            try:
                terms.append(_check_term(_term_from_dict(item)))
            except ValueError as exc:
                raise ValueError(f"routing term {position} {item!r}: {exc}") from None
        return cls(tuple(terms))

    def __repr__(self) -> str:
        return f"score({', '.join(map(repr, self.terms))})"


_TERM_FIELDS = {"label_eq": ("key", "value"), "metric": ("name",), "load": ()}
_TERM_CLASSES: dict[str, type] = {"label_eq": LabelEquals, "metric": MetricTerm, "load": LoadTerm}


def _term_from_dict(item: Any) -> Term:
    if not isinstance(item, Mapping):
        raise ValueError("a term must be a dict with a 'kind'")
    kind = item.get("kind")
    if kind not in _TERM_FIELDS:
        raise ValueError(f"unknown kind {kind!r} (use one of {', '.join(_TERM_FIELDS)})")
    fields = _TERM_FIELDS[kind]
    unknown = sorted(set(item) - {"kind", "weight", *fields}, key=str)
    if unknown:
        raise ValueError(f"unexpected {', '.join(map(repr, unknown))} for kind {kind!r}")
    missing = [name for name in fields if name not in item]
    if missing:
        raise ValueError(f"kind {kind!r} needs {', '.join(map(repr, missing))}")
    if kind == "label_eq" and not isinstance(item["value"], str):
        raise ValueError(f"label value must be a string, got {item['value']!r}")
    return _TERM_CLASSES[kind](*(item[name] for name in fields), weight=item.get("weight", 1))


def check_routing(routing: Any, owner: str) -> RoutingPolicy | None:
    """A ``score(...)`` policy, or its JSON form (``{"terms": [...]}``), as a RoutingPolicy.

    ``ValueError`` names ``owner`` and what is wrong.
    """
    if routing is None or isinstance(routing, RoutingPolicy):
        return routing
    if isinstance(routing, Mapping):
        try:
            return RoutingPolicy.from_dict(routing)
        except ValueError as exc:
            raise ValueError(f"{owner}: {exc}") from None
    if isinstance(routing, (Term, LabelRef)):
        raise ValueError(
            f"{owner}: routing must be score(...), got a bare term {routing!r}; wrap it: score({routing!r})"
        )
    raise ValueError(f"{owner}: routing must be score(...), got {routing!r}")


def score(*terms: Term) -> RoutingPolicy:
    """A routing policy: rank eligible workers by the weighted sum of ``terms`` (ties: least load)."""
    return RoutingPolicy(terms)
