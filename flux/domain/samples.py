"""A worker's resources sample: its wire form, and when a change of it is material.

What a worker probes is two ``Resources`` values, what it has (``total``) and what is
available now (``available``), by dimension name, beside its GPUs (devices, not
quantities) and its cpu utilisation. On the wire (registration, heartbeats, ``GET
/workers``) the dimensions it has always published keep their fields (``cpu_total``,
``cpu_available``, ``memory_total``, ``memory_available``, ``disk_total``,
``disk_free``); any other probed dimension travels in the ``capacity`` and
``available`` mappings, so a new one needs no change of schema. ``to_wire`` and
``from_wire`` are the one road between the two forms, on both sides.

A fleet's upkeep must not grow with the number of idle workers, so a heartbeat that
changes nothing material costs no database write (Kubernetes' kubelet likewise
reports node status only when it changes, or rarely). Both sides apply the same
rule: the worker leaves an immaterial sample out of its heartbeat, and the server
ignores one that a worker sends anyway.

What counts as material, and why, dimension by dimension over the two mappings:
- any change of a total, and a dimension appearing or disappearing (they change
  rarely and decide eligibility outright);
- cpu availability: any change (a count of schedulable cores, as rare);
- availability of the byte dimensions (memory, disk): a move of at least
  ``max(1% of the total, 64 MiB)``, below the noise of what any request asks for;
  of any other dimension: a move of at least 1% of its total;
- the set of GPUs: any change; each GPU's memory_available as a byte dimension, and
  crossing zero always; its utilisation, like ``cpu_percent``, by 20 points;
- ``flux.*`` percentages (cpu/memory percent, utilisation): 20 points, since they
  only steer soft routing scores and swing by several points on any busy host;
- any other published metric (the user's own provider): any change, since the user
  chose to route on it.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from flux.domain.numbers import INT64_MAX, is_number
from flux.domain.resources import BYTES, CPU, DISK, MEMORY, WELL_KNOWN, Quantity, Resources

#: Smallest move of available memory or disk (or a GPU's memory) worth a write.
MIN_BYTES_DELTA = 64 * 1024**2
#: Smallest move of any availability but cpu's, as a fraction of the total.
BYTES_FRACTION = 0.01
#: Percentage points a ``flux.*`` percentage (or cpu_percent) must move.
PERCENT_POINTS = 20.0

#: The fields the wire has always had, by dimension: (total, available).
WIRE_FIELDS: dict[str, tuple[str, str]] = {
    CPU: ("cpu_total", "cpu_available"),
    MEMORY: ("memory_total", "memory_available"),
    DISK: ("disk_total", "disk_free"),
}
#: The wire's mappings of the other probed dimensions: name -> total, name -> available.
CAPACITY, AVAILABLE = "capacity", "available"
#: A probed dimension's name: as a custom resource's (lowercase, Kubernetes extended-resource style).
_NAME = re.compile(r"^[a-z0-9]([a-z0-9._/-]{0,62}[a-z0-9])?$")


def available_field(name: str) -> str:
    """How a dimension's availability is named where it is shown: ``disk_free``, ``cpu_available``..."""
    fields = WIRE_FIELDS.get(name)
    return fields[1] if fields is not None else f"{name}_available"


def from_wire(sample: Mapping[str, Any]) -> tuple[Resources, Resources]:
    """``(total, available)`` of a sample in its wire form."""
    total = dict(sample.get(CAPACITY) or {})
    available = dict(sample.get(AVAILABLE) or {})
    for name, (total_field, available_field_) in WIRE_FIELDS.items():
        if total_field in sample:
            total[name] = sample[total_field]
            available[name] = sample[available_field_]
    return Resources(total), Resources(available)


def to_wire(total: Mapping[str, Quantity], available: Mapping[str, Quantity]) -> dict[str, Any]:
    """The wire form of ``(total, available)``: the fields it has always had, and the
    mappings only when some other dimension is probed."""
    wire: dict[str, Any] = {}
    for name, (total_field, available_field_) in WIRE_FIELDS.items():
        wire[total_field] = total.get(name, 0)
        wire[available_field_] = available.get(name, 0)
    others = {name: amount for name, amount in total.items() if name not in WIRE_FIELDS}
    if others:
        wire[CAPACITY] = others
        wire[AVAILABLE] = {name: available.get(name, 0) for name in others}
    return wire


def probed_problem(dimensions: Mapping[str, Any]) -> str | None:
    """Why a wire mapping of probed dimensions is refused, or ``None``: names as custom
    resources' (and none the wire has fields for, nor ``gpu``), quantities 0..2**63-1."""
    for name, amount in dimensions.items():
        if not isinstance(name, str) or not _NAME.match(name) or name in WELL_KNOWN:
            return (
                f"dimension name {name!r} must be lowercase letters, digits, '.', '_', '-' or '/',"
                f" and not one of {', '.join(WELL_KNOWN)}"
            )
        if not is_number(amount) or not 0 <= amount <= INT64_MAX:  # also NaN and infinity
            return f"dimension {name!r}: must be a number from 0 to 2**63-1, got {amount!r}"
    return None


def _moved(name: str, before: Quantity, after: Quantity, total: Quantity) -> bool:
    if after == before:
        return False
    if name == CPU:
        return True
    floor = MIN_BYTES_DELTA if name in BYTES else 0
    return abs(after - before) >= max(BYTES_FRACTION * total, floor)


def quantities_changed(old: tuple[Resources, Resources], new: tuple[Resources, Resources]) -> bool:
    """Whether ``new`` (total, available) differs materially from ``old``."""
    (old_total, old_available), (total, available) = old, new
    if old_total != total or old_available.keys() != available.keys():
        return True
    return any(_moved(name, old_available[name], amount, total.amount(name)) for name, amount in available.items())


def _gpus_changed(old: list[Mapping[str, Any]], new: list[Mapping[str, Any]]) -> bool:
    if [(g["index"], g["uuid"], g["memory_total"]) for g in old] != [
        (g["index"], g["uuid"], g["memory_total"]) for g in new
    ]:
        return True
    if [g.get("unhealthy") for g in old] != [g.get("unhealthy") for g in new]:
        return True  # a card in trouble, or well again, is published at once
    for before, after in zip(old, new):
        if (before["memory_available"] > 0) != (after["memory_available"] > 0):
            return True  # the spec counts GPUs with free memory: crossing zero always matters
        if _moved(MEMORY, before["memory_available"], after["memory_available"], after["memory_total"]):
            return True
        if abs(float(after.get("utilization", 0)) - float(before.get("utilization", 0))) >= PERCENT_POINTS:
            return True
    return False


def resources_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether ``new`` (a resources sample in its wire form) differs materially from ``old``."""
    if old is None:
        return True
    if quantities_changed(from_wire(old), from_wire(new)):
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
