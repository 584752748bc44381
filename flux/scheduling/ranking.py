"""Ranking: which of the eligible workers gets the execution (pure, no I/O).

Choice is soft and comes after eligibility (``flux.scheduling.filters``). Without a
routing policy the least-loaded worker wins (``candidate_key``), the same spreading
default as Kubernetes' LeastAllocated score and Nomad's spread scheduler, so work
fans out instead of piling onto the first worker that registered. With a routing
policy (``flux.domain.routing``) the eligible worker with the highest score wins,
ties broken by that same least-loaded order. A policy only ever ranks workers that
already passed the filters, so it can never pick an ineligible one.

``score_value`` is what placement ranks by; ``score_worker`` computes the same total
and explains it term by term, in words shown to users ("why did worker X win?")::

    label zone == a: +10
    metric queue_depth=3.0 × -1: -3
    load 0.25 (1/4 slots busy) × -5: -1.25

Both sum ``weight * value`` over the terms in policy order, so they agree exactly.
A metric the worker has not published, or whose value is not a finite int or float,
counts as 0.0. A total that is not a number (only possible with extreme weights
and values, e.g. ``+inf`` plus ``-inf``) counts as ``-inf``, the worst score, so
ranking never sees NaN.
"""

from __future__ import annotations

import math
from typing import Sequence

from flux.domain.routing import LabelEquals, LoadTerm, MetricTerm, RoutingPolicy, Term
from flux.scheduling.snapshot import WorkerView


def candidate_key(worker: WorkerView) -> tuple:
    """Least-loaded first, then fewer running, then registration order: a stable order."""
    return (worker.load, worker.running, worker.registered_seq, worker.name)


def best(pool: Sequence[WorkerView], routing: RoutingPolicy | None = None) -> WorkerView | None:
    """The worker to choose from ``pool`` (eligible workers with a free slot), or ``None``.

    Without a policy: the least loaded (minimum ``candidate_key``). With one: the
    highest ``score_value``, ties broken by ``candidate_key``. The only selection rule.
    """
    if not pool:
        return None
    if routing is None:
        return min(pool, key=candidate_key)
    return min(pool, key=lambda worker: (-score_value(routing, worker), candidate_key(worker)))


def why_chosen(worker: WorkerView, routing: RoutingPolicy | None, eligible: int) -> str:
    """The claim's reason: "least loaded of 3 eligible: 1/4 slots busy", or the score explained
    (``eligible``: the eligible workers with a free slot when the round first looked)."""
    if routing is None:
        return f"least loaded of {eligible} eligible: {worker.running}/{worker.max_concurrent_executions} slots busy"
    total, terms = score_worker(routing, worker)
    return f"highest score {total:g} of {eligible} eligible ({'; '.join(text for text, _ in terms)})"


def metric_value(name: str, worker: WorkerView) -> float | None:
    """The metric as a finite float, or ``None`` when the worker has no usable value.

    ``flux.running`` is the worker's live running count, whatever ``metrics`` holds.
    """
    if name == "flux.running":
        return float(worker.running)
    value = worker.metrics.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def term_value(term: Term, worker: WorkerView) -> float:
    """The term's unweighted value for ``worker``."""
    if isinstance(term, LabelEquals):
        have = worker.labels.get(term.key)
        return 1.0 if have is not None and str(have) == term.value else 0.0
    if isinstance(term, MetricTerm):
        value = metric_value(term.name, worker)
        return 0.0 if value is None else value
    if isinstance(term, LoadTerm):
        return float(worker.load)
    raise TypeError(f"not a routing term: {term!r}")


def _total(contributions) -> float:
    total = sum(contributions, 0.0)
    return -math.inf if math.isnan(total) else total


def score_value(policy: RoutingPolicy, worker: WorkerView) -> float:
    """The worker's score: the sum of ``weight * value`` over the policy's terms."""
    return _total(term.weight * term_value(term, worker) for term in policy.terms)


def _number(x: float) -> str:
    """``10`` for 10.0, ``1.25``, ``0.333333``: weights and contributions in descriptions."""
    x = float(x)
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.6g}"


def _signed(x: float) -> str:
    return "0" if x == 0 else ("+" if x > 0 else "") + _number(x)


def _measured(x: float) -> str:
    """A measured value, always with a decimal point: ``3.0``, ``0.3``, ``1.23457e+06``."""
    text = f"{x:.6g}"
    return text if any(c in text for c in ".en") else text + ".0"


def _describe(term: Term, worker: WorkerView, contribution: float) -> str:
    if isinstance(term, LabelEquals):
        have = worker.labels.get(term.key)
        if have is None:
            what = f"label {term.key} missing, not {term.value}"
        elif str(have) == term.value:
            what = f"label {term.key} == {term.value}"
        else:
            what = f"label {term.key}={have}, not {term.value}"
        return f"{what}: {_signed(contribution)}"
    if isinstance(term, MetricTerm):
        value = metric_value(term.name, worker)
        if value is not None:
            seen = f"metric {term.name}={_measured(value)}"
        elif term.name in worker.metrics:
            seen = f"metric {term.name}={worker.metrics[term.name]!r} not a finite number, taken as 0.0"
        else:
            seen = f"metric {term.name} missing, taken as 0.0"
        return f"{seen} × {_number(term.weight)}: {_signed(contribution)}"
    assert isinstance(term, LoadTerm)
    slots = worker.max_concurrent_executions
    busy = f"{worker.running}/{slots} slots busy" if slots > 0 else "no slots"
    return f"load {_measured(worker.load)} ({busy}) × {_number(term.weight)}: {_signed(contribution)}"


def score_worker(policy: RoutingPolicy, worker: WorkerView) -> tuple[float, list[tuple[str, float]]]:
    """The worker's score (equal to ``score_value``) and each term's ``(description, contribution)``."""
    contributions = [term.weight * term_value(term, worker) for term in policy.terms]
    breakdown = [(_describe(term, worker, c), c) for term, c in zip(policy.terms, contributions)]
    return _total(contributions), breakdown
