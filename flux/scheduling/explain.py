"""Why is it pending? Per-worker verdicts and a Kubernetes-style summary (pure, no I/O).

``0/3 workers are available: 2 Insufficient cpu, 1 didn't match affinity.`` is what
``kube-scheduler`` would say; Flux says the same thing about its workers, and the
per-worker lines carry the numbers (``cpu_available 2.0 < requested 4``).

Feasibility asks a different question: could any registered worker *ever* take this,
if it were idle? It checks capacity (totals) instead of availability, ignores slots
and drain, and so tells "wait" apart from "this will never run here".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.matching import WorkerView, check

PHRASES = {
    "affinity": "didn't match affinity",
    "cpu": "Insufficient cpu",
    "memory": "Insufficient memory",
    "disk": "Insufficient disk",
    "gpu": "Insufficient gpu",
    "package": "missing or mismatched package",
    "draining": "draining",
    "stale": "stale (missed heartbeats)",
    "slots": "all slots busy",
}


@dataclass(frozen=True)
class Verdict:
    worker: str
    #: None when the worker could take the execution right now.
    kind: str | None
    message: str

    @property
    def phrase(self) -> str:
        if self.kind and self.kind.startswith("resource:"):
            return f"Insufficient {self.kind.split(':', 1)[1]}"
        return PHRASES.get(self.kind or "", self.kind or "available")


def verdict(request: ResourceRequest | None, affinity: Mapping[str, Any] | None, worker: WorkerView) -> Verdict:
    """The first reason this worker cannot take the execution now, in dispatch's own order."""
    if worker.state == "DRAINING":
        return Verdict(worker.name, "draining", "draining")
    if worker.state == "STALE":
        return Verdict(worker.name, "stale", "stale: missed heartbeats, takes no work until it is heard from")
    mismatch = check(request, affinity, worker)
    if mismatch is not None:
        return Verdict(worker.name, mismatch.kind, mismatch.message)
    if worker.free_slots == 0:
        return Verdict(worker.name, "slots", f"all {worker.slots} slots busy")
    return Verdict(worker.name, None, "available")


def _tally(verdicts: Iterable[Verdict]) -> str:
    """"2 Insufficient cpu, 1 didn't match affinity": most common reason first."""
    reasons = Counter(v.phrase for v in verdicts if v.kind is not None)
    return ", ".join(f"{count} {phrase}" for phrase, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize(verdicts: list[Verdict]) -> str:
    available = sum(1 for v in verdicts if v.kind is None)
    if not verdicts:
        return "0/0 workers are available: no workers are registered."
    listed = _tally(verdicts)
    return f"{available}/{len(verdicts)} workers are available" + (f": {listed}." if listed else ".")


def capacity_view(worker: WorkerView) -> WorkerView:
    """The worker as if idle: totals for availability, every GPU free, no allotments."""
    return worker.evolve(
        cpu_available=worker.cpu_total,
        memory_available=worker.memory_total,
        disk_free=worker.disk_total,
        gpus=tuple(replace(gpu, memory_available=max(gpu.memory_total, 1)) for gpu in worker.gpus),
        gpu_allotted={},
        custom_available=dict(worker.custom_total),
        running=0,
        state="ONLINE",
        allocation="sample",
    )


def infeasibility(
    request: ResourceRequest | None, affinity: Mapping[str, Any] | None, workers: Iterable[WorkerView]
) -> str | None:
    """Why no registered worker could ever take this, or None when one could."""
    verdicts = [verdict(request, affinity, capacity_view(w)) for w in workers]
    if any(v.kind is None for v in verdicts):
        return None
    if not verdicts:
        return "no workers are registered"
    return f"no registered worker could ever satisfy it, even idle: {_tally(verdicts)} (of {len(verdicts)})"
