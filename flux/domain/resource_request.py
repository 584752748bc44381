"""``ResourceRequest``: what a workflow needs from the worker it runs on.

The schema is closed (cpu, memory, disk, gpu, gpu_memory, packages, and ``resources``
for countable custom resources) so that a typo fails at decoration time instead of
silently matching every worker; anything else is a worker label routed with
affinity. Values are validated and normalised here (memory and disk to bytes, cpu
to cores) so the matcher only compares numbers. By default a request is routing
guidance, not a limit (the spec's "match is not enforce"); a worker started with
``--enforce-requests`` turns it into ceilings on the execution's process.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from decimal import ROUND_CEILING, Decimal
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from packaging.requirements import Requirement


from flux.domain.numbers import INT64_MAX, is_number
from flux.domain.resources import WELL_KNOWN, Resources

FIELDS = ("cpu", "memory", "disk", "gpu", "gpu_memory", "packages", "resources")

# Kubernetes quantity suffixes: decimal k..E (powers of 1000), binary Ki..Ei (powers of 1024).
_SUFFIXES = {
    **{s: 1000**i for i, s in enumerate("kMGTPE", start=1)},
    **{s + "i": 1024**i for i, s in enumerate("KMGTPE", start=1)},
}
_LARGEST_FIRST = sorted(_SUFFIXES.items(), key=lambda item: -item[1])
_QUANTITY = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(%s)?" % "|".join(_SUFFIXES))
_CPU = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(m)?")


class InvalidResourceRequest(ValueError):
    """A request field could not be validated; the message names the field and value."""


def _compact(amount: float) -> int | float:
    return int(amount) if float(amount).is_integer() else amount


def _too_large(field: str, value: Any) -> InvalidResourceRequest:
    return InvalidResourceRequest(
        f"{field}: {value!r} is more than the largest quantity, 2**63-1 bytes (just under 8Ei)"
    )


def parse_quantity(value: Any, field: str) -> int:
    """Bytes from an int or a Kubernetes quantity string ("512Mi", "8Gi", "1G", "1.5Gi"),
    at most ``INT64_MAX`` (what every column and the API hold).

    Fractions of a byte round up, as Kubernetes does. ``field`` is the name used in
    error messages (e.g. "ResourceRequest.memory").
    """
    if is_number(value):
        if not value > 0:  # also NaN
            raise InvalidResourceRequest(f"{field}: must be a positive number of bytes, got {value!r}")
        if value > INT64_MAX:  # also infinity; an int too large for a float compares exactly
            raise _too_large(field, value)
        return math.ceil(value)
    match = _QUANTITY.fullmatch(value.strip()) if isinstance(value, str) else None
    if not match:
        raise InvalidResourceRequest(
            f"{field}: cannot parse {value!r} as a quantity (use bytes or a suffix like 512Mi, 8Gi, 1G, 500M)"
        )
    number, suffix = match.groups()
    amount = (Decimal(number) * _SUFFIXES.get(suffix, 1)).to_integral_value(ROUND_CEILING)
    if amount > INT64_MAX:
        raise _too_large(field, value)
    result = int(amount)
    if result <= 0:
        raise InvalidResourceRequest(f"{field}: must be a positive quantity, got {value!r}")
    return result


def parse_cpu(value: Any) -> float:
    """Cores from a positive number or a string: "4", "0.5", "500m" (millicores)."""
    field = "ResourceRequest.cpu"
    if is_number(value):
        cores = float(value) if abs(value) <= INT64_MAX else math.inf
    else:
        match = _CPU.fullmatch(value.strip()) if isinstance(value, str) else None
        if not match:
            raise InvalidResourceRequest(
                f"{field}: cannot parse {value!r} as cores (use a number like 4 or 0.5, or millicores like 500m)"
            )
        number, milli = match.groups()
        cores = float(number) / (1000 if milli else 1)
    if not 0 < cores <= INT64_MAX:  # also NaN and infinity
        raise InvalidResourceRequest(f"{field}: must be a positive number of cores up to 2**63-1, got {value!r}")
    return cores


def format_bytes(n: int) -> str:
    """``n`` in the largest unit that divides it exactly ("8Gi", "10G"), else plain bytes."""
    for suffix, factor in _LARGEST_FIRST:
        if n % factor == 0:
            return f"{n // factor}{suffix}"
    return str(n)


@lru_cache(maxsize=1024)
def _requirement(text: str) -> Requirement:
    # imported on first use: a subprocess child whose workflows ask for no packages
    # never pays for ``packaging`` (docs/footprint.md)
    from packaging.requirements import Requirement

    return Requirement(text)


def _parse_gpu(value: Any) -> int | float:
    """Whole cards (``gpu=2``, or ``2.0``) or a fraction of one card (``gpu=0.5``): a
    placement shares a card or takes whole ones, never one and a half (Ray's rule)."""
    if not is_number(value) or not 0 < value <= INT64_MAX:  # also NaN, infinity and bools
        raise InvalidResourceRequest(
            f"ResourceRequest.gpu: must be a whole number of cards up to 2**63-1 or a fraction of one card "
            f"(0 < gpu < 1), got {value!r}"
        )
    if value < 1:
        return float(value)
    if float(value).is_integer():
        return int(value)
    raise InvalidResourceRequest(
        f"ResourceRequest.gpu: {value!r} is neither a whole number of cards nor a fraction of one card "
        "(0 < gpu < 1); ask for whole cards, or a fraction that one card can hold"
    )


def _parse_packages(value: Any) -> tuple[str, ...]:
    field = "ResourceRequest.packages"
    if not isinstance(value, (list, tuple)):
        raise InvalidResourceRequest(
            f"{field}: must be a list of requirement strings like ['torch>=2.0'], got {value!r}"
        )
    packages = []
    for item in value:
        if not isinstance(item, str):
            raise InvalidResourceRequest(f"{field}: each entry must be a requirement string, got {item!r}")
        from packaging.requirements import InvalidRequirement

        try:
            _requirement(item.strip())
        except InvalidRequirement as exc:
            raise InvalidResourceRequest(f"{field}: invalid requirement {item!r}: {exc}") from None
        packages.append(item.strip())
    return tuple(packages)


#: Custom resource names: lowercase, Kubernetes extended-resource style ("fpga", "example.com/licence").
_RESOURCE_NAME = re.compile(r"^[a-z0-9]([a-z0-9._/-]{0,62}[a-z0-9])?$")


def parse_custom_resources(value: Any, field: str = "ResourceRequest.resources") -> tuple[tuple[str, float], ...]:
    """Countable custom resources ({"fpga": 2, "matlab_license": 1}), as sorted pairs."""
    if isinstance(value, tuple) and all(isinstance(pair, tuple) and len(pair) == 2 for pair in value):
        value = dict(value)  # already parsed (dataclasses.replace passes fields back in)
    if not isinstance(value, Mapping):
        raise InvalidResourceRequest(f"{field}: must be a mapping of resource name to amount, got {value!r}")
    parsed = []
    for name, amount in value.items():
        if not isinstance(name, str) or not _RESOURCE_NAME.match(name):
            raise InvalidResourceRequest(
                f"{field}: resource name {name!r} must be lowercase letters, digits, '.', '_', '-' or '/'"
            )
        if name in WELL_KNOWN:  # one namespace: resources={"cpu": 2} would be a second cpu
            raise InvalidResourceRequest(f"{field}: {name!r} is not a custom resource; ask for it as {name}=...")
        if not is_number(amount) or not 0 < amount <= INT64_MAX:  # also NaN and infinity
            raise InvalidResourceRequest(f"{field}[{name!r}]: must be a positive number, got {amount!r}")
        parsed.append((name, float(amount)))
    return tuple(sorted(parsed))


class _Shortcut:
    """``ResourceRequest.with_cpu(4)`` on the class, ``request.with_cpu(4)`` on an instance."""

    def __init__(self, field: str):
        self.field = field

    def __get__(self, instance: ResourceRequest | None, owner: type[ResourceRequest]):
        base = owner() if instance is None else instance

        def build(value: Any) -> ResourceRequest:
            return replace(base, **{self.field: value})

        build.__name__ = f"with_{self.field}"
        build.__doc__ = f"A copy of this request with {self.field} set (validated)."
        return build


@dataclass(frozen=True, init=False)
class ResourceRequest:
    """What a workflow needs: every set field is a ``>=`` threshold on the worker."""

    cpu: float | None
    memory: int | None
    disk: int | None
    #: Whole cards (an int >= 1) or a share of one card (a float in (0, 1)).
    gpu: int | float | None
    #: Bytes of device memory wanted on each allotted card (accounting, not a limit); alone
    #: (no ``gpu``), a share of one card sized by memory only.
    gpu_memory: int | None
    packages: tuple[str, ...]
    #: Countable custom resources workers advertise (``--resource fpga=2``), sorted pairs.
    resources: tuple[tuple[str, float], ...]

    def __init__(
        self, *, cpu=None, memory=None, disk=None, gpu=None, gpu_memory=None, packages=None, resources=None, **unknown
    ):
        if unknown:
            names = ", ".join(repr(name) for name in sorted(unknown))
            noun = "an unknown field" if len(unknown) == 1 else "unknown fields"
            raise InvalidResourceRequest(
                f"ResourceRequest got {noun} {names}; fields are {', '.join(FIELDS)}. "
                "Count anything else with resources={...}, or advertise it with worker labels and route with affinity"
            )
        set_ = object.__setattr__
        set_(self, "cpu", None if cpu is None else parse_cpu(cpu))
        set_(self, "memory", None if memory is None else parse_quantity(memory, "ResourceRequest.memory"))
        set_(self, "disk", None if disk is None else parse_quantity(disk, "ResourceRequest.disk"))
        set_(self, "gpu", None if gpu is None else _parse_gpu(gpu))
        set_(
            self, "gpu_memory", None if gpu_memory is None else parse_quantity(gpu_memory, "ResourceRequest.gpu_memory")
        )
        set_(self, "packages", () if packages is None else _parse_packages(packages))
        set_(self, "resources", () if resources is None else parse_custom_resources(resources))

    with_cpu = _Shortcut("cpu")
    with_memory = _Shortcut("memory")
    with_disk = _Shortcut("disk")
    with_gpu = _Shortcut("gpu")
    with_gpu_memory = _Shortcut("gpu_memory")
    with_packages = _Shortcut("packages")
    with_resources = _Shortcut("resources")

    @property
    def custom(self) -> dict[str, float]:
        return dict(self.resources)

    @cached_property
    def quantities(self) -> Resources:
        """Every quantity asked for, by dimension: cpu, memory, disk, gpu and the ``resources`` map."""
        asked = {
            name: getattr(self, name) for name in ("cpu", "memory", "disk", "gpu") if getattr(self, name) is not None
        }
        return Resources({**asked, **dict(self.resources)})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResourceRequest:
        if not isinstance(data, Mapping) or not all(isinstance(key, str) for key in data):
            raise InvalidResourceRequest(f"ResourceRequest: expected a mapping of field names, got {data!r}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, with only the fields that are set."""
        data = {name: getattr(self, name) for name in ("cpu", "memory", "disk", "gpu", "gpu_memory")}
        data["packages"] = list(self.packages) or None
        data["resources"] = {name: _compact(amount) for name, amount in self.resources} or None
        return {name: value for name, value in data.items() if value is not None}

    @property
    def shares_gpu(self) -> bool:
        """Whether it asks for a share of one card (a fraction, or only memory) rather
        than whole cards: what the GPU filter packs onto cards others share."""
        return self.gpu < 1 if self.gpu is not None else self.gpu_memory is not None

    @property
    def is_empty(self) -> bool:
        return not self.to_dict()

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        return tuple(_requirement(text) for text in self.packages)

    def describe(self) -> str:
        """Short and human: "cpu=4, memory=8Gi, gpu=1, packages=[torch>=2.0]": the one form
        people read a request in (CLI tables and records, the console's chips)."""
        return ", ".join(self.parts()) or "none"

    def parts(self) -> list[str]:
        """Each thing asked for as ``name=amount``, in ``describe``'s order and form."""
        parts = []
        if self.cpu is not None:
            parts.append(f"cpu={self.cpu:g}")
        for name in ("memory", "disk"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={format_bytes(getattr(self, name))}")
        if self.gpu is not None:
            parts.append(f"gpu={self.gpu:g}")
        if self.gpu_memory is not None:
            parts.append(f"gpu_memory={format_bytes(self.gpu_memory)}")
        if self.packages:
            parts.append(f"packages=[{', '.join(self.packages)}]")
        parts += [f"{name}={amount:g}" for name, amount in self.resources]
        return parts


def request_or_none(value: ResourceRequest | Mapping[str, Any] | None) -> ResourceRequest | None:
    """The request ``value`` makes, validated, or ``None`` when it asks for nothing.

    An empty request is no request: ``None``, ``{}`` and ``ResourceRequest()`` all come
    back as ``None``, so nothing empty is stored and unconstrained work keeps the
    dispatcher's fast path. A mapping is parsed (``InvalidResourceRequest`` if it is bad).
    """
    if value is None:
        return None
    request = value if isinstance(value, ResourceRequest) else ResourceRequest.from_dict(value)
    return None if request.is_empty else request
