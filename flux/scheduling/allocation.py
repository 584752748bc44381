"""Allotment: what dispatch sets aside on a worker for each execution (pure, no I/O).

Every placement records an allotment: the request's cpu, memory, disk and custom
resources, and specific GPU indexes, chosen as the worker's least-allotted GPUs with free memory.
Choosing indexes always (not only under reserve) means two ``gpu=1`` executions on
a two-GPU worker get different cards whenever they can, and the runner exports
exactly those indexes in ``CUDA_VISIBLE_DEVICES``.

Custom resources (``--resource fpga=2``) have no live sample, so they are always
counted: total minus what running executions hold, in either mode.

Under ``allocation = "reserve"`` a worker's availability for matching becomes
``min(last sample, capacity - sum of running allotments)`` - the Kubernetes
scheduler's "allocatable minus requests", tempered by the live sample - and a GPU
allotted to one execution is not offered to another. Under the default
``"sample"`` the spec's threshold model stands: only the live sample counts, and
GPUs may be shared once every card is allotted.
"""

from __future__ import annotations

from typing import Iterable

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.matching import WorkerView


def choose_gpus(worker: WorkerView, count: int) -> list[int]:
    usable = [gpu for gpu in worker.gpus if worker.gpu_is_usable(gpu)]
    usable.sort(key=lambda gpu: (worker.gpu_allotted.get(gpu.index, 0), gpu.index))
    return sorted(gpu.index for gpu in usable[:count])


def allotment_for(request: ResourceRequest | None, worker: WorkerView) -> dict:
    if request is None:
        return {}
    allotment: dict = {}
    for name in ("cpu", "memory", "disk"):
        if getattr(request, name) is not None:
            allotment[name] = getattr(request, name)
    if request.gpu:
        allotment["gpus"] = choose_gpus(worker, request.gpu)
    if request.resources:
        allotment["resources"] = request.custom
    return allotment


def take(worker: WorkerView, allotment: dict) -> None:
    """Count a new allotment against the worker's view (within one placement round)."""
    _count_gpus(worker, allotment)
    worker.custom_available = _minus(worker.custom_available, allotment.get("resources", {}))
    if worker.reserves:
        worker.cpu_available -= allotment.get("cpu", 0)
        worker.memory_available -= allotment.get("memory", 0)
        worker.disk_free -= allotment.get("disk", 0)


def _count_gpus(worker: WorkerView, allotment: dict) -> None:
    for index in allotment.get("gpus", ()):
        worker.gpu_allotted[index] = worker.gpu_allotted.get(index, 0) + 1


def _minus(available: dict[str, float], taken: dict[str, float]) -> dict[str, float]:
    return {name: amount - taken.get(name, 0.0) for name, amount in available.items()}


def with_allotments(worker: WorkerView, allotments: Iterable[dict]) -> WorkerView:
    """Apply the allotments of the executions a worker runs to a fresh view of it."""
    allotments = [a for a in allotments if a]
    worker.gpu_allotted = {}
    worker.custom_available = dict(worker.custom_total)
    for allotment in allotments:
        _count_gpus(worker, allotment)
        worker.custom_available = _minus(worker.custom_available, allotment.get("resources", {}))
    if worker.reserves:
        worker.cpu_available = min(worker.cpu_available, worker.cpu_total - sum(a.get("cpu", 0) for a in allotments))
        worker.memory_available = min(worker.memory_available, worker.memory_total - sum(a.get("memory", 0) for a in allotments))
        worker.disk_free = min(worker.disk_free, worker.disk_total - sum(a.get("disk", 0) for a in allotments))
    return worker
