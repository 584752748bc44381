"""GPUs through NVML: cards, the MIG slices of cards in MIG mode, and their health.

NVML talks to the driver's own ``libnvidia-ml`` in-process (``nvidia-ml-py``, or any
binding with its API: ``--gpu-source nvml:module:attribute``). Each card is a device;
a card in MIG mode is published with ``mig`` set and each of its slices follows as a
device of its own (numbered after the cards, since CUDA knows a slice by UUID only),
with its profile parsed from its name ("NVIDIA A100-SXM4-40GB MIG 1g.5gb"). A card's
health comes from ``flux.worker.gpu_health``; a slice fares as its card does.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from contextvars import ContextVar
from typing import Any, Iterator

from flux.objects import import_object
from flux.worker.gpu_health import HealthWatch

logger = logging.getLogger("flux.worker.probe")
#: Where ``explained`` keeps the reasons no GPU was found (None: nobody asked).
_REASONS: ContextVar[list[str] | None] = ContextVar("gpu_reasons", default=None)


def no_gpus(message: str, *args: Any) -> None:
    """Why no GPU was found this way: logged at DEBUG on every look, and kept for the
    caller of ``explained`` (the worker tells it at INFO when it registers)."""
    logger.debug(message, *args)
    kept = _REASONS.get()
    if kept is not None:
        kept.append(message % args if args else message)


@contextlib.contextmanager
def explained() -> Iterator[list[str]]:
    """The reasons the probes inside this block found no GPU, in the order they were found."""
    reasons: list[str] = []
    token = _REASONS.set(reasons)
    try:
        yield reasons
    finally:
        _REASONS.reset(token)


#: One health watch per NVML binding: it keeps the XID event set between samples.
_WATCHES: dict[int, HealthWatch] = {}


def text(value: Any) -> str:
    """NVML returns bytes in old bindings and str in new ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def number(value: Any) -> float:
    """Coerce to float; NaN/None/garbage (GPUtil's parse failures) become 0.0."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(f) else f


def utilization(percent: Any) -> float:
    return min(max(number(percent), 0.0), 100.0)


def _detect_nvml(nvml: Any = None) -> list[dict] | None:
    """GPUs via NVML (cards, their MIG slices, their health), or None (with the reason
    logged) when NVML is unusable."""
    nvml = _nvml(nvml)
    if nvml is None:
        return None
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError: driver not loaded, library not found, ...
        no_gpus("no GPUs via NVML: NVML init failed: %s (no driver?)", exc)
        return None
    try:
        gpus = _nvml_devices(nvml)
    except Exception as exc:
        no_gpus("no GPUs via NVML: NVML query failed: %s", exc)
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:
            logger.debug("NVML shutdown failed: %s", exc)
    if not gpus:
        no_gpus("no GPUs: NVML initialised but reports 0 devices")
    return gpus


def _nvml(nvml: Any) -> Any:
    if nvml is not None:
        return nvml
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        no_gpus("no GPUs via NVML: nvidia-ml-py not installed")
        return None
    return pynvml


def _nvml_devices(nvml: Any) -> list[dict]:
    """Every card, each followed by its MIG slices (numbered after the cards: CUDA knows a
    slice by UUID only), with what the health watch says of each card."""
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    watch = _WATCHES.setdefault(id(nvml), HealthWatch(nvml))
    cards = [_device(nvml, handle, i) for i, handle in enumerate(handles)]
    for handle, card in zip(handles, cards):
        watch.watch(handle, card["uuid"])
    watch.poll(lambda handle: text(nvml.nvmlDeviceGetUUID(handle)))
    gpus: list[dict] = []
    slices: list[dict] = []
    for handle, card in zip(handles, cards):
        capability = _optional(lambda: "%d.%d" % tuple(nvml.nvmlDeviceGetCudaComputeCapability(handle)))
        if capability:
            card["compute_capability"] = capability
        trouble = watch.verdict(handle, card["uuid"])
        if trouble:
            card["unhealthy"] = trouble
        own = _mig_slices(nvml, handle, card, len(handles) + len(slices))
        if own:
            card["mig"] = True
        gpus.append(card)
        slices += own
    return gpus + slices


def _device(nvml: Any, handle: Any, index: int) -> dict:
    mem = nvml.nvmlDeviceGetMemoryInfo(handle)
    try:
        busy = utilization(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception as exc:  # e.g. NOT_SUPPORTED on some devices (MIG slices among them)
        logger.debug("GPU %d: utilization unavailable: %s", index, exc)
        busy = 0.0
    return {
        "index": index,
        "uuid": text(nvml.nvmlDeviceGetUUID(handle)),
        "name": text(nvml.nvmlDeviceGetName(handle)),
        "memory_total": int(mem.total),
        "memory_available": int(mem.free),
        "utilization": busy,
    }


def _optional(read: Any) -> Any:
    """What ``read()`` returns, or None when the card or the binding does not support it."""
    try:
        return read()
    except Exception:
        return None


_MIG_PROFILE = re.compile(r"MIG\s+(\S+)\s*$")


def _mig_slices(nvml: Any, handle: Any, card: dict, first_index: int) -> list[dict]:
    """The MIG slices of a card in MIG mode, as devices of their own."""
    mode = _optional(lambda: nvml.nvmlDeviceGetMigMode(handle))
    if not mode or not mode[0]:
        return []
    slices = []
    for slot in range(_optional(lambda: nvml.nvmlDeviceGetMaxMigDeviceCount(handle)) or 0):
        part = _optional(lambda: nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot))
        if part is None:  # an empty slot
            continue
        device = _device(nvml, part, first_index + len(slices))
        profile = _MIG_PROFILE.search(device["name"])
        device.update(parent=card["uuid"], mig_profile=profile.group(1) if profile else None)
        for name in ("compute_capability", "unhealthy"):  # a slice fares as its card does
            if card.get(name):
                device[name] = card[name]
        slices.append(device)
    return slices


def driver_version(source: str = "auto", nvml: Any = None) -> str | None:
    """The NVIDIA driver's version through NVML (for the ``flux.gpu/driver`` label), or None."""
    if source == "none" or source == "gputil":
        return None
    nvml = import_object(source[len("nvml:") :]) if source.startswith("nvml:") else _nvml(nvml)
    if nvml is None:
        return None
    try:
        nvml.nvmlInit()
    except Exception:
        return None
    try:
        return _optional(lambda: text(nvml.nvmlSystemGetDriverVersion()))
    finally:
        _optional(nvml.nvmlShutdown)
