"""Packing GPU shares across the fleet: best fit over the cards already shared (pure, no I/O).

A share (``gpu=0.5``, ``gpu_memory="20Gi"``) that went to the least-loaded worker
spread shares one or two per worker, and every worker kept a card partly used: a
quarter of the fleet's cards stopped being whole (B19). So a share goes first to the
card, anywhere among its eligible workers with a free slot, that already holds shares
and has the least room left that still holds it (best fit, fractions first, then
memory); only when no shared card holds it does it open a fresh card, on the
least-loaded eligible worker (``flux.scheduling.placement``). Online best fit opens a
new card only when no open card can take the share, which keeps whole cards free
for ``gpu=N`` as far as arrival order allows.

``OpenCards`` keeps the round's shared cards with room left in one list sorted by
(fraction left, memory left), so a share finds its card by bisection: for each level
of fraction left it jumps to the first card with enough memory. A card whose room
changed outside the index (room held for a preemptor) is re-keyed when found; a
search looks at ``SCAN`` cards at most, then opens a fresh card instead.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Callable, Iterable

from flux.domain.allotment import Allotment
from flux.scheduling.filters.gpu import Ask, refusal
from flux.scheduling.snapshot import GPU, WorkerView

#: Cards one search looks at, at most (each costs a check of its worker).
SCAN = 48
#: Floating-point slack when fractions are summed (as the GPU filter's).
_SLACK = 1e-9
_INF = float("inf")

#: (fraction left, memory left, worker name, card index)
Key = tuple[float, int, str, int]


def _room(worker: WorkerView, gpu: GPU) -> tuple[float, int]:
    fraction, memory = worker.gpu_shared.get(gpu.index, (0.0, 0))
    return 1.0 - fraction, gpu.memory_total - memory


class OpenCards:
    def __init__(self, workers: Iterable[WorkerView]):
        self._keys: list[Key] = []
        self._at: dict[tuple[str, int], Key] = {}
        for worker in workers:
            if worker.gpu_shared:
                for gpu in worker.gpus:
                    self._set(worker, gpu)
        self._keys.sort()

    def _set(self, worker: WorkerView, gpu: GPU, keep_sorted: bool = False) -> None:
        """Index ``gpu`` by its room now (out of the index when it holds no share or is full)."""
        old = self._at.pop((worker.name, gpu.index), None)
        if old is not None:
            del self._keys[bisect_left(self._keys, old)]
        if gpu.index not in worker.gpu_shared:
            return
        fraction, memory = _room(worker, gpu)
        if fraction <= _SLACK:  # a card whose memory is all reserved still holds a share that asks none
            return
        key = (fraction, memory, worker.name, gpu.index)
        self._at[(worker.name, gpu.index)] = key
        insort(self._keys, key) if keep_sorted else self._keys.append(key)

    def taken(self, worker: WorkerView, allotment: Allotment) -> None:
        """A share was placed on ``worker``: its cards' room changed."""
        for device in allotment.devices:
            if not device.whole:
                gpu = next(g for g in worker.gpus if g.index == device.index)
                self._set(worker, gpu, keep_sorted=True)

    def best(self, ask: Ask, views: dict[str, WorkerView], accept: Callable[[WorkerView], bool]) -> WorkerView | None:
        """The worker of the shared card with the least room that holds ``ask``, among those
        ``accept`` takes (eligible, a free slot, still fitting), or None."""
        keys, needed, looked = self._keys, ask.memory or 0, 0
        start = i = bisect_left(keys, (ask.fraction - _SLACK,))
        while i < len(keys) and looked < SCAN:
            level = keys[i][0]
            i = bisect_left(keys, (level, needed), i)  # the first card of this level with the memory
            end = bisect_right(keys, (level, _INF), i)
            while i < end and looked < SCAN:
                looked += 1
                _, _, name, index = keys[i]
                worker = views.get(name)
                gpu = None if worker is None else next((g for g in worker.gpus if g.index == index), None)
                if gpu is None or _room(worker, gpu) != keys[i][:2]:  # gone, or changed outside the index
                    if gpu is None:
                        del keys[i]
                        self._at.pop((name, index), None)
                    else:
                        self._set(worker, gpu, keep_sorted=True)
                    end = i = start  # the order moved: look again from the start
                    break
                if refusal(worker, gpu, ask) is None and accept(worker):
                    return worker
                i += 1
            i = max(i, end)
        return None


def packing_reason(worker: WorkerView, eligible: int) -> str:
    """The claim's reason when a share went to a card already shared."""
    busy = f"{worker.running}/{worker.max_concurrent_executions}"
    return f"best-fitting shared gpu of {eligible} eligible: {busy} slots busy"
