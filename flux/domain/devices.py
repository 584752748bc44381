"""GPU device labels: what a worker publishes about its cards, for affinity.

The worker reads its cards through NVML and publishes them as labels, as NVIDIA's GPU
feature discovery does for Kubernetes nodes, so device attributes are matched with
the affinity operators every other label uses (``flux.domain.affinity``):

* ``flux.gpu/model``: the card's name with spaces as dashes (``NVIDIA-H200``);
* ``flux.gpu/memory``: its memory in whole GiB (``141``);
* ``flux.gpu/compute-capability``: ``9.0``, so ``Gt(7.9)`` or ``">=8.0"`` selects Ampere and later;
* ``flux.gpu/driver``: the driver version (``550.54.15``);
* ``flux.gpu/mig``: ``true`` when some card is split into MIG slices, and then
  ``flux.gpu/mig-profile``: the profile of its slices (``1g.10gb``).

A worker whose cards differ publishes the least of them (the lowest memory and
compute capability, the first card's model): a label promises what every card can do.
The GPU filter matches ``flux.gpu/mig-profile`` against each slice's own profile.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

PREFIX = "flux.gpu/"
MODEL = PREFIX + "model"
MEMORY = PREFIX + "memory"
COMPUTE_CAPABILITY = PREFIX + "compute-capability"
DRIVER = PREFIX + "driver"
MIG = PREFIX + "mig"
MIG_PROFILE = PREFIX + "mig-profile"

_GiB = 1024**3
#: A label value: letters, digits, '-', '_' and '.', starting and ending with one of the first two.
_UNFIT = re.compile(r"[^A-Za-z0-9_.-]+")


def label_value(text: str) -> str:
    """``text`` as a label value: "NVIDIA H200 NVL" -> "NVIDIA-H200-NVL"."""
    return _UNFIT.sub("-", text.strip()).strip("-_.")[:63].strip("-_.")


def _capability(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in (text or "").split("."))
    except ValueError:
        return ()


def gpu_labels(gpus: Iterable[Mapping[str, Any]], driver: str | None = None) -> dict[str, str]:
    """The labels a worker publishes for its GPUs (plain data by ``GPU`` field name); none without GPUs."""
    devices = list(gpus)
    cards = [gpu for gpu in devices if not gpu.get("parent")]
    if not cards:
        return {}
    labels = {
        MODEL: label_value(str(cards[0]["name"])),
        MEMORY: str(min(int(g["memory_total"]) for g in cards) // _GiB),
    }
    capabilities = [g.get("compute_capability") for g in cards if g.get("compute_capability")]
    if capabilities:
        labels[COMPUTE_CAPABILITY] = min(capabilities, key=_capability)
    if driver:
        labels[DRIVER] = label_value(driver)
    labels[MIG] = "true" if any(g.get("mig") for g in cards) else "false"
    profiles = [g["mig_profile"] for g in devices if g.get("parent") and g.get("mig_profile")]
    if profiles:
        labels[MIG_PROFILE] = label_value(profiles[0])
    return labels
