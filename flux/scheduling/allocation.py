"""Allotment: what dispatch sets aside on a worker for each execution (pure, no I/O).

Every placement records an ``Allotment`` (``flux.domain.allotment``), each dimension's
part written by that dimension's filter: the request's quantities (cpu, memory, disk,
any other probed dimension, custom resources) and specific GPU indexes
(``flux.scheduling.filters``).

Under ``allocation = "reserve"`` a worker's availability for matching becomes
``min(last sample, capacity - sum of running allotments)`` - the Kubernetes
scheduler's "allocatable minus requests", tempered by the live sample - and a GPU
allotted to one execution is not offered to another. Under the default
``"sample"`` the spec's threshold model stands: only the live sample counts, and
GPUs may be shared once every card is allotted. Custom resources have no live
sample, so they are counted in either mode.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from flux.domain.allotment import EMPTY, Allotment, DeviceShare
from flux.domain.resource_request import ResourceRequest
from flux.domain.resources import Resources
from flux.scheduling.filters import PIPELINE, Filter, Pipeline
from flux.scheduling.snapshot import WorkerView


def combined(parts: Iterable[Allotment]) -> Allotment:
    """One allotment of the parts (each dimension's filter writes its own)."""
    found = [part for part in parts if part]
    if len(found) <= 1:
        return found[0] if found else EMPTY
    quantities: dict = {}
    gpus: tuple[int, ...] = ()
    devices: tuple[DeviceShare, ...] = ()
    for part in found:
        quantities.update(part.resources)
        gpus += part.gpus
        devices += part.devices
    return Allotment(Resources(quantities), gpus, devices)


def allotment_for(filters: Iterable[Filter], request: ResourceRequest | None, worker: WorkerView) -> Allotment:
    """What placing an execution on ``worker`` sets aside; ``filters`` are the ones active for it."""
    return combined(f.allot(request, worker) for f in filters)


class Allotter:
    """What placements under one set of constraints set aside: the part that does not
    depend on the worker (the quantities asked) built once, the GPU devices per placement
    (chosen by the request and, for MIG slices, the affinity)."""

    def __init__(self, filters: tuple[Filter, ...], affinity: Mapping[str, Any] | None = None):
        self.steady = tuple(f for f in filters if not f.allots_per_worker)
        self.per_worker = tuple(f for f in filters if f.allots_per_worker)
        self.affinity = affinity
        self._shared: Allotment | None = None
        self._bound: tuple[Callable[[WorkerView], Allotment], ...] | None = None

    def __call__(self, request: ResourceRequest | None, worker: WorkerView) -> Allotment:
        shared = self._shared
        if shared is None:
            shared = self._shared = allotment_for(self.steady, request, worker)
        if not self.per_worker:
            return shared
        if self._bound is None:
            self._bound = tuple(f.bind_allot(request, self.affinity) for f in self.per_worker)
        parts = [allot(worker) for allot in self._bound]
        if shared is EMPTY and len(parts) == 1:
            return parts[0]
        return combined([shared, *parts])


def take(filters: Iterable[Filter], worker: WorkerView, allotment: Allotment) -> None:
    """Count a new allotment against the worker's view (within one placement round)."""
    for f in filters:
        f.take(worker, allotment)


def with_allotments(worker: WorkerView, allotments: Iterable[Allotment], pipeline: Pipeline = PIPELINE) -> WorkerView:
    """Apply the allotments of the executions a worker runs to a fresh view of it, each
    dimension by its filter of ``pipeline``."""
    allotments = [a for a in allotments if a]
    for f in pipeline:
        f.apply(worker, allotments)
    return worker
