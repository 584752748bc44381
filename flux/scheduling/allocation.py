"""Allotment: what dispatch sets aside on a worker for each execution (pure, no I/O).

Every placement records an allotment, one entry per dimension the execution asks
for, each written by that dimension's filter: the request's cpu, memory and disk,
specific GPU indexes, and custom resources (``flux.scheduling.filters``).

Under ``allocation = "reserve"`` a worker's availability for matching becomes
``min(last sample, capacity - sum of running allotments)`` - the Kubernetes
scheduler's "allocatable minus requests", tempered by the live sample - and a GPU
allotted to one execution is not offered to another. Under the default
``"sample"`` the spec's threshold model stands: only the live sample counts, and
GPUs may be shared once every card is allotted. Custom resources have no live
sample, so they are counted in either mode.
"""

from __future__ import annotations

from typing import Iterable

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters import PIPELINE, Filter
from flux.scheduling.snapshot import WorkerView


def allotment_for(filters: Iterable[Filter], request: ResourceRequest | None, worker: WorkerView) -> dict:
    """What placing an execution on ``worker`` sets aside; ``filters`` are the ones active for it."""
    allotment: dict = {}
    for f in filters:
        f.allot(request, worker, allotment)
    return allotment


def take(filters: Iterable[Filter], worker: WorkerView, allotment: dict) -> None:
    """Count a new allotment against the worker's view (within one placement round)."""
    for f in filters:
        f.take(worker, allotment)


def with_allotments(worker: WorkerView, allotments: Iterable[dict]) -> WorkerView:
    """Apply the allotments of the executions a worker runs to a fresh view of it."""
    allotments = [a for a in allotments if a]
    for f in PIPELINE:
        f.apply(worker, allotments)
    return worker
