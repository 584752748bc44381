"""A namespace's quota: the most it may hold at once, by dimension.

``flux namespace quota ml cpu=16 memory=64Gi gpu=4 executions=100 resources.fpga=2``:
each dimension is a ceiling on what the namespace's executions that hold a worker
(CLAIMED, RUNNING, CANCELLING) have been allotted together - what placements
reserve, which is what requests declare - and ``executions`` on how many hold a
worker at once. A dimension the quota does not name is unlimited, as a Kubernetes
ResourceQuota's is. A key that names no dimension (``gpus=2``) is refused with the
closest valid one: accepted, it would limit nothing. The value is pure: the ledger
that counts against it is ``flux.scheduling.quotas``.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from flux.domain.resource_request import (
    InvalidResourceRequest,
    format_bytes,
    parse_cpu,
    parse_custom_resources,
    parse_quantity,
)
from flux.domain.resources import BYTES, CPU, DISK, GPU, MEMORY, Resources

#: The quota's count of executions holding a worker (not a resource dimension).
EXECUTIONS = "executions"
#: A custom resource is set as ``resources.fpga=2``; the quota holds it as ``fpga``, the
#: name its allotments (and ``held``) count it under.
CUSTOM_PREFIX = "resources."
#: The keys a quota takes besides ``resources.NAME``, in the order they are shown.
DIMENSIONS = (CPU, MEMORY, DISK, GPU, EXECUTIONS)
#: Keys that name something a quota does not count, and why.
NOT_COUNTED = {
    "gpu_memory": "GPU memory is not counted by a quota: gpu counts cards, a share of one as its fraction (gpu=1.5)",
}
_KEYS = f"a quota takes {', '.join(DIMENSIONS)}, resources.NAME"


class InvalidQuota(InvalidResourceRequest):
    """A quota key or value is refused; the message names the key, and the closest valid one."""


def dimension(key: str) -> str:
    """The dimension a quota key names (``resources.fpga`` -> ``fpga``), or ``InvalidQuota``
    with the closest valid key (``gpus`` -> ``did you mean gpu?``)."""
    if key in DIMENSIONS:
        return key
    if key.startswith(CUSTOM_PREFIX):
        name = key[len(CUSTOM_PREFIX) :]
        parse_custom_resources({name: 1}, f"quota key {key!r}")  # the custom resource name rule
        return name
    if key in NOT_COUNTED:
        raise InvalidQuota(f"unknown quota key {key!r}: {NOT_COUNTED[key]}")
    close = difflib.get_close_matches(key.lower(), DIMENSIONS, n=1, cutoff=0.6)
    if not close and _custom_name(key):
        close = [CUSTOM_PREFIX + key]
    hint = f"; did you mean {close[0]}?" if close else ""
    raise InvalidQuota(f"unknown quota key {key!r}{hint} ({_KEYS})")


def _custom_name(name: str) -> bool:
    try:
        parse_custom_resources({name: 1})
    except InvalidResourceRequest:
        return False
    return True


def _limit(name: str, value: Any) -> float:
    field = f"quota {name}"
    if name == CPU:
        try:
            return parse_cpu(value)
        except InvalidResourceRequest as exc:  # said of a request's field; here it is the quota's
            raise InvalidQuota(str(exc).replace("ResourceRequest.cpu", field, 1)) from None
    if name in BYTES:
        return parse_quantity(value, field)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise InvalidQuota(f"{field}: must be a number >= 0, got {value!r}") from None
    if not math.isfinite(number) or number < 0 or (name == EXECUTIONS and not number.is_integer()):
        whole = "a whole number" if name == EXECUTIONS else "a number"
        raise InvalidQuota(f"{field}: must be {whole} >= 0, got {value!r}")
    return number


def _pairs(items: Iterable[str]) -> dict[str, str]:
    """``NAME=VALUE`` words, as the command line gives them."""
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InvalidQuota(f"quota: expected NAME=VALUE (cpu=16, memory=64Gi, executions=100), got {item!r}")
        values[name.strip()] = value.strip()
    return values


@dataclass(frozen=True)
class Quota:
    #: Ceilings by dimension (cpu, memory, disk, gpu, custom resources).
    limits: Resources = Resources()
    #: The most executions holding a worker at once; ``None``: no ceiling.
    executions: int | None = None

    def __bool__(self) -> bool:
        return bool(self.limits) or self.executions is not None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "Quota":
        """From ``{"cpu": 16, "memory": "64Gi", "executions": 100, "resources.fpga": 2}``;
        ``InvalidQuota`` (a ``ValueError``) names the key and value."""
        limits: dict[str, float] = {}
        executions = None
        for key, value in values.items():
            name = dimension(key)
            if name == EXECUTIONS:
                executions = int(_limit(name, value))
            else:
                limits[name] = _limit(name, value)
        return cls(Resources(limits), executions)

    @classmethod
    def parse(cls, items: Iterable[str]) -> "Quota":
        """From ``NAME=VALUE`` words, as the command line gives them."""
        return cls.from_mapping(_pairs(items))

    def to_json(self) -> dict[str, float | int]:
        """As stored and answered: custom resources by their own name, as ``held`` counts them."""
        data: dict[str, float | int] = {name: whole(amount) for name, amount in sorted(self.limits.items())}
        if self.executions is not None:
            data[EXECUTIONS] = self.executions
        return data

    def keys(self) -> dict[str, float | int]:
        """As it is set: ``{"cpu": 1, "resources.fpga": 2}`` (what ``from_mapping`` reads)."""
        return {_key(name): amount for name, amount in self.to_json().items()}

    def describe(self) -> str:
        """``cpu=1 memory=64Gi executions=2 resources.fpga=2``; ``none`` for no quota."""
        words = [f"{_key(name)}={_shown(name, amount)}" for name, amount in self.to_json().items()]
        return " ".join(words) or "none"

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Quota":
        if not data:
            return NO_QUOTA
        limits = {name: value for name, value in data.items() if name != EXECUTIONS}
        executions = data.get(EXECUTIONS)
        return cls(Resources(limits), None if executions is None else int(executions))


@dataclass(frozen=True)
class QuotaChange:
    """A merge patch of a quota (RFC 7396, as ``kubectl patch --type merge``): the keys it
    sets change, those it removes go, every other key is kept."""

    sets: Quota = Quota()
    #: The dimensions removed (``fpga``, ``executions``).
    removes: frozenset[str] = frozenset()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "QuotaChange":
        """From ``{"gpu": 2, "cpu": null}``: a null removes its key."""
        removes = frozenset(dimension(key) for key, value in values.items() if value is None)
        return cls(Quota.from_mapping({key: value for key, value in values.items() if value is not None}), removes)

    @classmethod
    def parse(cls, items: Iterable[str], unset: Iterable[str] = ()) -> "QuotaChange":
        """From ``NAME=VALUE`` words and the keys ``--unset`` names; a key both set and
        removed is refused."""
        values: dict[str, Any] = _pairs(items)
        for key in unset:
            if key in values:
                raise InvalidQuota(f"quota key {key!r} is both set and unset")
            values[key] = None
        return cls.from_mapping(values)

    def applied_to(self, quota: Quota) -> Quota:
        limits = quota.limits.without(self.removes).updated(self.sets.limits)
        executions = None if EXECUTIONS in self.removes else quota.executions
        return Quota(limits, self.sets.executions if self.sets.executions is not None else executions)

    def keys(self) -> dict[str, float | int | None]:
        """As the API takes it: ``{"gpu": 2, "resources.fpga": null}``."""
        return {**self.sets.keys(), **{_key(name): None for name in sorted(self.removes)}}


def _key(name: str) -> str:
    return name if name in DIMENSIONS else CUSTOM_PREFIX + name


def _shown(name: str, amount: float) -> str:
    return format_bytes(int(amount)) if name in BYTES else f"{amount:g}"


def whole(amount: float) -> float | int:
    """An amount as it was given: a whole one as an int (``gpu=8`` answers 8, not 8.0), a
    fraction as it is (``gpu=1.5``); quotas and what is held are counted in floats."""
    return int(amount) if float(amount).is_integer() else amount


NO_QUOTA = Quota()
