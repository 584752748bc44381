"""A namespace's quota: the most it may hold at once, by dimension.

``flux namespace quota ml cpu=16 memory=64Gi gpu=4 executions=100 resources.fpga=2``:
each dimension is a ceiling on what the namespace's executions that hold a worker
(CLAIMED, RUNNING, CANCELLING) have been allotted together - what placements
reserve, which is what requests declare - and ``executions`` on how many hold a
worker at once. A dimension the quota does not name is unlimited, as a Kubernetes
ResourceQuota's is. The value is pure: the ledger that counts against it is
``flux.scheduling.quotas``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from flux.domain.resource_request import InvalidResourceRequest, parse_cpu, parse_custom_resources, parse_quantity
from flux.domain.resources import BYTES, CPU, GPU, Resources

#: The quota's count of executions holding a worker (not a resource dimension).
EXECUTIONS = "executions"
#: ``resources.fpga=2`` and ``fpga=2`` name the same custom resource.
CUSTOM_PREFIX = "resources."


def _limit(name: str, value: Any) -> float:
    field = f"quota {name}"
    if name == CPU:
        return parse_cpu(value)
    if name in BYTES:
        return parse_quantity(value, field)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise InvalidResourceRequest(f"{field}: must be a whole number >= 0, got {value!r}") from None
    if not math.isfinite(number) or number < 0 or (name in (GPU, EXECUTIONS) and not number.is_integer()):
        raise InvalidResourceRequest(f"{field}: must be a whole number >= 0, got {value!r}")
    return number


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
        ``InvalidResourceRequest`` (a ``ValueError``) names the dimension and value."""
        limits: dict[str, float] = {}
        executions = None
        for raw, value in values.items():
            name = raw[len(CUSTOM_PREFIX) :] if raw.startswith(CUSTOM_PREFIX) else raw
            if name == EXECUTIONS:
                executions = int(_limit(name, value))
            elif name in (CPU, GPU, *BYTES):
                limits[name] = _limit(name, value)
            else:
                parse_custom_resources({name: 1}, "quota")  # the custom resource name rule
                limits[name] = _limit(name, value)
        return cls(Resources(limits), executions)

    @classmethod
    def parse(cls, items: Iterable[str]) -> "Quota":
        """From ``NAME=VALUE`` words, as the command line gives them."""
        values: dict[str, str] = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep or not name.strip() or not value.strip():
                raise InvalidResourceRequest(
                    f"quota: expected NAME=VALUE (cpu=16, memory=64Gi, executions=100), got {item!r}"
                )
            values[name.strip()] = value.strip()
        return cls.from_mapping(values)

    def to_json(self) -> dict[str, float | int]:
        data: dict[str, float | int] = {name: _compact(amount) for name, amount in sorted(self.limits.items())}
        if self.executions is not None:
            data[EXECUTIONS] = self.executions
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Quota":
        if not data:
            return NO_QUOTA
        limits = {name: value for name, value in data.items() if name != EXECUTIONS}
        executions = data.get(EXECUTIONS)
        return cls(Resources(limits), None if executions is None else int(executions))


def _compact(amount: float) -> float | int:
    return int(amount) if float(amount).is_integer() else amount


NO_QUOTA = Quota()
