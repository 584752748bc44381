"""When a worker's resource sample has changed enough to be worth publishing.

A fleet's upkeep must not grow with the number of idle workers, so a heartbeat that
changes nothing material costs no database write (Kubernetes' kubelet likewise
reports node status only when it changes, or rarely). Both sides apply the same
rule: the worker leaves an immaterial sample out of its heartbeat, and the server
ignores one that a worker sends anyway.

What counts as material, and why:
- cpu_available, cpu_total, memory_total, disk_total, the set of GPUs: any change
  (they change rarely and decide eligibility outright);
- memory_available, disk_free, each GPU's memory_available: a move of at least
  ``max(1% of the total, 64 MiB)``, below the noise of what any request asks for;
- ``flux.*`` percentages (cpu/memory percent, utilisation): 20 points, since they
  only steer soft routing scores and swing by several points on any busy host;
- any other published metric (the user's own provider): any change, since the user
  chose to route on it.
"""

from __future__ import annotations

from typing import Any, Mapping

#: Smallest move of available memory or disk (or a GPU's memory) worth a write.
MIN_BYTES_DELTA = 64 * 1024**2
BYTES_FRACTION = 0.01
#: Percentage points a ``flux.*`` percentage (or cpu_percent) must move.
PERCENT_POINTS = 20.0
EXACT_FIELDS = ("cpu_total", "cpu_available", "memory_total", "disk_total")
BYTES_FIELDS = (("memory_available", "memory_total"), ("disk_free", "disk_total"))


def _bytes_moved(old: float, new: float, total: float) -> bool:
    return abs(new - old) >= max(BYTES_FRACTION * total, MIN_BYTES_DELTA)


def _gpus_changed(old: list[Mapping[str, Any]], new: list[Mapping[str, Any]]) -> bool:
    if [(g["index"], g["uuid"], g["memory_total"]) for g in old] != [(g["index"], g["uuid"], g["memory_total"]) for g in new]:
        return True
    for before, after in zip(old, new):
        if (before["memory_available"] > 0) != (after["memory_available"] > 0):
            return True  # the spec counts GPUs with free memory: crossing zero always matters
        if _bytes_moved(before["memory_available"], after["memory_available"], after["memory_total"]):
            return True
        if abs(float(after.get("utilization", 0)) - float(before.get("utilization", 0))) >= PERCENT_POINTS:
            return True
    return False


def resources_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether ``new`` (a resources sample) differs materially from ``old``."""
    if old is None:
        return True
    if any(old.get(name) != new.get(name) for name in EXACT_FIELDS):
        return True
    if any(_bytes_moved(old[name], new[name], new[total]) for name, total in BYTES_FIELDS):
        return True
    if abs(float(new.get("cpu_percent", 0)) - float(old.get("cpu_percent", 0))) >= PERCENT_POINTS:
        return True
    return _gpus_changed(list(old.get("gpus") or []), list(new.get("gpus") or []))


def metrics_changed(old: Mapping[str, float] | None, new: Mapping[str, float]) -> bool:
    """Whether published metrics moved: ``flux.*`` percentages by 20 points, others at all."""
    if old is None:
        return bool(new)
    if old.keys() != new.keys():
        return True
    for name, value in new.items():
        if name.startswith("flux."):
            if abs(value - old[name]) >= PERCENT_POINTS:
                return True
        elif value != old[name]:
            return True
    return False
