"""Why is it pending? Per-worker verdicts and a Kubernetes-style summary (pure, no I/O).

``0/3 workers are available: 2 Insufficient cpu, 1 didn't match affinity.`` is what
``kube-scheduler`` would say; Flux says the same thing about its workers, and the
per-worker lines carry the numbers (``cpu_available 2.0 < requested 4``). Both come
from the typed ``Reason`` of the first filter a worker fails, or of the gate before
the filters that stopped it (namespace, draining, stale) or after them (all slots busy).

Feasibility asks a different question: could any registered worker *ever* take this,
if it were idle? It checks capacity (totals) instead of availability, ignores slots
and drain, and so tells "wait" apart from "this will never run here".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from flux.domain.namespaces import DEFAULT
from flux.domain.resource_request import ResourceRequest
from flux.domain.workers import AllocationMode, WorkerState
from flux.scheduling.filters import PIPELINE, Pipeline, Reason
from flux.scheduling.namespaces import NAME as NAMESPACE
from flux.scheduling.namespaces import refusal
from flux.scheduling.snapshot import WorkerView

DRAINING = Reason("draining", "draining", "draining")
#: A draining worker that runs nothing: DRAINED, as ``flux worker list`` says.
DRAINED = Reason("draining", "drained", "drained")
STALE = Reason("stale", "stale (missed heartbeats)", "stale: missed heartbeats, takes no work until it is heard from")


def _all_slots_busy(worker: WorkerView) -> Reason:
    return Reason("slots", "all slots busy", f"all {worker.max_concurrent_executions} slots busy")


@dataclass(frozen=True)
class Verdict:
    worker: str
    #: None when the worker could take the execution right now.
    reason: Reason | None

    @property
    def available(self) -> bool:
        return self.reason is None

    @property
    def message(self) -> str:
        return "available" if self.reason is None else self.reason.message


def verdict(
    request: ResourceRequest | None,
    affinity: Mapping[str, Any] | None,
    worker: WorkerView,
    namespace: str = DEFAULT,
    pipeline: Pipeline = PIPELINE,
) -> Verdict:
    """The first reason this worker cannot take the execution now, in dispatch's own order
    (a restriction to other namespaces first: it holds whatever else changes)."""
    restricted = refusal(worker, namespace)
    if restricted is not None:
        return Verdict(worker.name, restricted)
    if worker.state == WorkerState.DRAINING:
        return Verdict(worker.name, DRAINED if worker.shown_state == WorkerState.DRAINED else DRAINING)
    if worker.state == WorkerState.STALE:
        return Verdict(worker.name, STALE)
    reason = pipeline.check(request, affinity, worker)
    if reason is None and worker.free_slots == 0:
        reason = _all_slots_busy(worker)
    return Verdict(worker.name, reason)


def _tally(verdicts: Iterable[Verdict]) -> str:
    """ "2 Insufficient cpu, 1 didn't match affinity": most common reason first."""
    reasons = Counter(v.reason.phrase for v in verdicts if v.reason is not None)
    return ", ".join(f"{count} {phrase}" for phrase, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize(verdicts: list[Verdict]) -> str:
    available = sum(1 for v in verdicts if v.available)
    if not verdicts:
        return "0/0 workers are available: no workers are registered."
    listed = _tally(verdicts)
    return f"{available}/{len(verdicts)} workers are available" + (f": {listed}." if listed else ".")


def capacity_view(worker: WorkerView, pipeline: Pipeline = PIPELINE) -> WorkerView:
    """The worker as if idle: every dimension as its filter sees it with nothing running."""
    view = worker.evolve(running=0, state=WorkerState.ONLINE, allocation=AllocationMode.SAMPLE)
    for f in pipeline:
        f.idle(view)
    return view


def infeasibility(
    request: ResourceRequest | None,
    affinity: Mapping[str, Any] | None,
    workers: Iterable[WorkerView],
    namespace: str = DEFAULT,
    pipeline: Pipeline = PIPELINE,
) -> str | None:
    """Why no registered worker could ever take this, or None when one could."""
    verdicts = [verdict(request, affinity, capacity_view(w, pipeline), namespace, pipeline) for w in workers]
    if any(v.available for v in verdicts):
        return None
    if not verdicts:
        return "no workers are registered"
    if all(v.reason.filter == NAMESPACE for v in verdicts):
        return f"no registered worker serves namespace {namespace!r}: all {len(verdicts)} serve other namespaces only"
    return f"no registered worker could ever satisfy it, even idle: {_tally(verdicts)} (of {len(verdicts)})"
