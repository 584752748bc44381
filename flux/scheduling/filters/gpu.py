"""GPUs: a request for ``gpu=N`` needs N of the worker's GPUs with free memory.

Every placement is allotted specific GPU indexes, the worker's least-allotted GPUs
with free memory. Choosing indexes always (not only under reserve) means two
``gpu=1`` executions on a two-GPU worker get different cards whenever they can, and
the runner exports exactly those indexes in ``CUDA_VISIBLE_DEVICES``. Under
``allocation = "reserve"`` a GPU allotted to one execution is not offered to
another; under the default ``"sample"`` GPUs may be shared once every card is allotted.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any, Iterable, Mapping

from flux.domain.allotment import Allotment
from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters.base import Check, Consumption, Filter, Reason
from flux.scheduling.snapshot import GPU, WorkerView


def gpu_is_usable(worker: WorkerView, gpu: GPU) -> bool:
    """Free memory (the spec's test); under reserve also not allotted to another execution."""
    return gpu.memory_available > 0 and not (worker.reserves and worker.gpu_allotted.get(gpu.index, 0))


def usable_gpus(worker: WorkerView) -> int:
    return sum(1 for gpu in worker.gpus if gpu_is_usable(worker, gpu))


def choose_gpus(worker: WorkerView, count: int) -> list[int]:
    usable = [gpu for gpu in worker.gpus if gpu_is_usable(worker, gpu)]
    usable.sort(key=lambda gpu: (worker.gpu_allotted.get(gpu.index, 0), gpu.index))
    return sorted(gpu.index for gpu in usable[:count])


@lru_cache(maxsize=1024)
def _allotted(indexes: tuple[int, ...]) -> Allotment:
    """The allotment of these GPU indexes (values, so one each: placements share them)."""
    return Allotment(gpus=indexes)


def _count(worker: WorkerView, indexes: Iterable[int]) -> None:
    for index in indexes:
        worker.gpu_allotted[index] = worker.gpu_allotted.get(index, 0) + 1


class GPUs(Filter):
    name = "gpu"
    phrase = "Insufficient gpu"
    consumed = Consumption.UNDER_RESERVE
    allots_per_worker = True

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        return request is not None and request.gpu is not None

    def bind(self, request: ResourceRequest, affinity: Mapping[str, Any] | None) -> Check:
        wanted = request.gpu

        def check(worker: WorkerView) -> Reason | None:
            usable = usable_gpus(worker)
            if usable >= wanted:
                return None
            if not worker.gpus:
                return self.reason(f"has no GPUs (requested {wanted})")
            what = "unallotted gpus with free memory" if worker.reserves else "gpus with free memory"
            return self.reason(f"{what} {usable} < requested {wanted}")

        return check

    def allot(self, request: ResourceRequest, worker: WorkerView) -> Allotment:
        return _allotted(tuple(choose_gpus(worker, request.gpu)))

    def take(self, worker: WorkerView, allotment: Allotment) -> None:
        _count(worker, allotment.gpus)

    def apply(self, worker: WorkerView, allotments: list[Allotment]) -> None:
        worker.gpu_allotted = {}
        for allotment in allotments:
            _count(worker, allotment.gpus)

    def idle(self, worker: WorkerView) -> None:
        """Every GPU free and unallotted."""
        worker.gpus = tuple(replace(gpu, memory_available=max(gpu.memory_total, 1)) for gpu in worker.gpus)
        worker.gpu_allotted = {}


GPUS = GPUs()
