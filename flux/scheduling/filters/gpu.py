"""GPUs: whole cards (``gpu=N``), a share of one card (``gpu=0.5``, ``gpu_memory="20Gi"``), MIG slices.

Every placement is allotted specific devices, by index and UUID. ``gpu=N`` takes N
whole cards with free memory (the spec's test), the least-allotted first, so two
``gpu=1`` executions on a two-card worker get different cards whenever they can.
Under ``allocation = "reserve"`` a card allotted whole is not offered again; under
the default ``"sample"`` whole cards may be shared once every card is allotted.

A share packs: it goes to the card with the least room left that still holds its
fraction and memory (best fit), so shares fill few cards and whole cards stay free.
Shares are always counted (a card's fractions never pass 1, its reserved memory never
its total), in either mode, and a card holding shares is never given whole, nor a
card allotted whole shared. A card split into MIG slices is never allotted; its
slices are devices of their own, offered only to ``gpu=N`` with ``flux.gpu/mig-profile``
affinity and one execution each. An unhealthy device is never allotted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import islice
from typing import Any, Callable, Mapping

from flux.domain.affinity import label_mismatch
from flux.domain.allotment import Allotment, DeviceShare
from flux.domain.devices import MIG_PROFILE
from flux.domain.resource_request import ResourceRequest, format_bytes
from flux.scheduling.filters.base import Check, Consumption, Filter, Reason
from flux.scheduling.snapshot import GPU, WorkerView

#: Floating-point slack when fractions are summed (ten shares of 0.1 fill a card).
_SLACK = 1e-9
_ANY_CARD = object()


@dataclass(frozen=True, slots=True)
class Ask:
    """What one request asks of a worker's devices (slots: read per card per check)."""

    count: int
    #: The share of each device: 1.0 whole.
    fraction: float
    #: Bytes of memory per device, or None.
    memory: int | None
    share: bool
    #: The ``flux.gpu/mig-profile`` affinity entry (slices wanted), or ``_ANY_CARD``.
    profile: Any = _ANY_CARD
    #: Whether it names a MIG profile (read per card: cheaper than comparing ``profile``).
    sliced: bool = False


def ask_of(request: ResourceRequest, affinity: Mapping[str, Any] | None = None) -> Ask:
    profile = (affinity or {}).get(MIG_PROFILE, _ANY_CARD)
    sliced = profile is not _ANY_CARD
    if request.shares_gpu:
        return Ask(1, float(request.gpu or 0.0), request.gpu_memory, True, profile, sliced)
    return Ask(int(request.gpu or 1), 1.0, request.gpu_memory, False, profile, sliced)


def _kind_refusal(gpu: GPU, ask: Ask) -> str | None:
    """Why this device is never for this kind of request (its health, MIG, its profile)."""
    if gpu.unhealthy:
        return f"unhealthy: {gpu.unhealthy}"
    if gpu.mig:
        return "split into MIG slices"
    if ask.profile is _ANY_CARD:
        return "a MIG slice" if gpu.parent is not None else None
    if ask.share and gpu.parent is not None:
        return "a MIG slice is not shared"
    labels = {MIG_PROFILE: gpu.mig_profile} if gpu.mig_profile else {}
    return label_mismatch(MIG_PROFILE, ask.profile, labels)


def refusal(worker: WorkerView, gpu: GPU, ask: Ask) -> str | None:
    """Why ``gpu`` cannot be allotted for ``ask`` now, or ``None`` when it can (called per
    card per check: a healthy plain card asked for by a request without a MIG profile
    skips the device-kind questions)."""
    if ask.sliced or gpu.unhealthy or gpu.mig or gpu.parent is not None:
        kind = _kind_refusal(gpu, ask)
        if kind is not None:
            return kind
    if gpu.memory_available <= 0:
        return "no free memory"
    if ask.share:
        if worker.gpu_allotted.get(gpu.index):
            return "allotted whole"
        fraction, memory = worker.gpu_shared.get(gpu.index, (0.0, 0))
        if fraction + ask.fraction > 1 + _SLACK:
            return f"{fraction:g} of it allotted"
        if ask.memory is not None and ask.memory > min(gpu.memory_total - memory, gpu.memory_available):
            return f"{format_bytes(max(min(gpu.memory_total - memory, gpu.memory_available), 0))} of memory left"
        return None
    if worker.gpu_shared and gpu.index in worker.gpu_shared:
        return "shared by fractions"
    if worker.gpu_allotted and worker.gpu_allotted.get(gpu.index) and (worker.reserves or gpu.parent is not None):
        return "allotted"
    if ask.memory is not None and gpu.memory_available < ask.memory:
        return f"{format_bytes(gpu.memory_available)} of memory free"
    return None


def gpu_is_usable(worker: WorkerView, gpu: GPU) -> bool:
    """Whether ``gpu=1`` could be given this card now."""
    return refusal(worker, gpu, _WHOLE) is None


def usable_gpus(worker: WorkerView) -> int:
    return sum(1 for gpu in worker.gpus if gpu_is_usable(worker, gpu))


def choose(worker: WorkerView, ask: Ask) -> list[GPU]:
    """The devices a placement is allotted: the least-allotted whole ones, or the best-fitting card for a share."""
    free = (gpu for gpu in worker.gpus if refusal(worker, gpu, ask) is None)
    if not ask.share and worker.reserves:  # an allotted card is refused: every usable one is unallotted,
        return list(islice(free, ask.count))  # and the first are the lowest (``WorkerView.gpus`` is by index)
    usable = list(free)
    if not ask.share:
        usable.sort(key=lambda gpu: (worker.gpu_allotted.get(gpu.index, 0), gpu.index))
        return sorted(usable[: ask.count], key=lambda gpu: gpu.index)
    return [min(usable, key=lambda gpu: _room_after(worker, gpu, ask))] if usable else []


def _room_after(worker: WorkerView, gpu: GPU, ask: Ask) -> tuple[float, int, int]:
    fraction, memory = worker.gpu_shared.get(gpu.index, (0.0, 0))
    return (1.0 - fraction - ask.fraction, gpu.memory_total - memory - (ask.memory or 0), gpu.index)


@lru_cache(maxsize=4096)
def _allotted(devices: tuple[tuple[int, str], ...], fraction: float, memory: int | None) -> Allotment:
    """The allotment of these devices (values, so one each: placements share them)."""
    shares = tuple(DeviceShare(uuid, index, fraction, memory) for index, uuid in devices)
    return Allotment(gpus=tuple(index for index, _ in devices), devices=shares)


def _counted(worker: WorkerView, allotments: list[Allotment]) -> None:
    """Count allotments against the view, on new dicts: views copied with ``evolve`` share them."""
    whole, shared = dict(worker.gpu_allotted), dict(worker.gpu_shared)
    for allotment in allotments:
        if not allotment.devices:  # written before devices: whole cards by index
            for index in allotment.gpus:
                whole[index] = whole.get(index, 0) + 1
        for device in allotment.devices:
            if device.whole:
                whole[device.index] = whole.get(device.index, 0) + 1
            else:
                fraction, memory = shared.get(device.index, (0.0, 0))
                shared[device.index] = (fraction + device.fraction, memory + (device.memory or 0))
    worker.gpu_allotted, worker.gpu_shared = whole, shared


def _summary(worker: WorkerView, ask: Ask) -> str:
    """Each device that said no and why: "gpu0 0.75 of it allotted; gpu1 unhealthy: XID 79"."""
    said = [f"gpu{gpu.index} {why}" for gpu in worker.gpus if (why := refusal(worker, gpu, ask)) is not None]
    return "; ".join(said[:8]) + ("; ..." if len(said) > 8 else "")


class GPUs(Filter):
    name = "gpu"
    phrase = "Insufficient gpu"
    dimension = None
    #: Shares are counted in either mode, so a worker is checked again before it is chosen.
    consumed = Consumption.ALWAYS
    allots_per_worker = True

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        return request is not None and (request.gpu is not None or request.gpu_memory is not None)

    def bind(self, request: ResourceRequest, affinity: Mapping[str, Any] | None) -> Check:
        ask = ask_of(request, affinity)
        if ask.share:
            return lambda worker: self._share_check(worker, ask, request)
        return lambda worker: self._whole_check(worker, ask)

    def _whole_check(self, worker: WorkerView, ask: Ask) -> Reason | None:
        if not worker.gpus:
            return self.reason(f"has no GPUs (requested {ask.count})")
        usable = 0
        for gpu in worker.gpus:
            if refusal(worker, gpu, ask) is None:
                usable += 1
                if usable >= ask.count:
                    return None
        what = "unallotted gpus with free memory" if worker.reserves else "gpus with free memory"
        if ask.memory is not None:
            what += f" >= {format_bytes(ask.memory)}"
        message = f"{what} {usable} < requested {ask.count}"
        trouble = [f"gpu{gpu.index} unhealthy: {gpu.unhealthy}" for gpu in worker.gpus if gpu.unhealthy]
        return self.reason("; ".join([message, *trouble]))

    def _share_check(self, worker: WorkerView, ask: Ask, request: ResourceRequest) -> Reason | None:
        for gpu in worker.gpus:
            if refusal(worker, gpu, ask) is None:
                return None
        asked = ", ".join(part for part in request.describe().split(", ") if part.startswith("gpu"))
        return self.reason(
            f"no gpu has room for {asked}" + (f": {_summary(worker, ask)}" if worker.gpus else ": no gpus")
        )

    def allot(self, request: ResourceRequest, worker: WorkerView) -> Allotment:
        return self.bind_allot(request, None)(worker)

    def bind_allot(
        self, request: ResourceRequest, affinity: Mapping[str, Any] | None
    ) -> Callable[[WorkerView], Allotment]:
        ask = ask_of(request, affinity)
        memory = ask.memory if ask.share else None

        def allot(worker: WorkerView) -> Allotment:
            return _allotted(tuple((gpu.index, gpu.uuid) for gpu in choose(worker, ask)), ask.fraction, memory)

        return allot

    def take(self, worker: WorkerView, allotment: Allotment) -> None:
        _counted(worker, [allotment])

    def apply(self, worker: WorkerView, allotments: list[Allotment]) -> None:
        worker.gpu_allotted, worker.gpu_shared = {}, {}
        _counted(worker, allotments)

    def idle(self, worker: WorkerView) -> None:
        """Every device free, unallotted and healthy (a device in trouble may recover)."""
        worker.gpus = tuple(
            replace(gpu, memory_available=max(gpu.memory_total, 1), unhealthy=None) for gpu in worker.gpus
        )
        worker.gpu_allotted, worker.gpu_shared = {}, {}


_WHOLE = Ask(1, 1.0, None, False)
GPUS = GPUs()
