"""Allotment: what a placement set aside on a worker for one execution.

The one road from what dispatch decided to what the worker enforces: the server
records it with the claim (``WORKFLOW_CLAIMED`` and ``GET .../explain`` show it),
the claimed job carries it, and the runner's ceilings (cpu, memory) and device
pinning (GPU indexes) read it and nothing else.

Its JSON form is the one the API shows: the well-known quantities at
the top (``cpu``, ``memory``, ``disk``), ``gpus`` as indexes and custom resources
under ``resources``; a dimension nothing was set aside for is absent. GPUs are also
listed by UUID under ``devices``, each with the share of the card set aside (a form
without ``devices`` reads too, its ``gpus`` as whole cards).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from flux.domain.resources import CPU, DISK, GPU, MEMORY, Quantity, Resources

#: No quantities (a value, so shared: ``Resources`` is immutable).
NOTHING = Resources()
#: The quantities shown at the top of the JSON form (the GPU count is ``len(gpus)``).
_TOP = (CPU, MEMORY, DISK)


@dataclass(frozen=True)
class DeviceShare:
    """One GPU (a card or a MIG slice) set aside for an execution, and how much of it.

    ``fraction`` and ``memory`` are accounting: a card shared by fractions is not
    partitioned, so what keeps two executions within their shares is their own code
    (docs/gpu.md). A MIG slice is a device of its own and is always allotted whole."""

    uuid: str
    #: Its NVML index (a slice: its card's), for readers that pin by index.
    index: int
    #: The share of the device: 1.0 is all of it; less shares it with other executions.
    fraction: float = 1.0
    #: Bytes of device memory set aside (shares only; a whole device holds all of its own).
    memory: int | None = None

    @property
    def whole(self) -> bool:
        return self.fraction >= 1.0 and self.memory is None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"uuid": self.uuid, "index": self.index}
        if not self.whole:
            data["fraction"] = self.fraction
        if self.memory is not None:
            data["memory"] = self.memory
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "DeviceShare":
        fraction = data.get("fraction")
        return cls(
            str(data["uuid"]),
            int(data.get("index") or 0),
            1.0 if fraction is None else float(fraction),
            None if data.get("memory") is None else int(data["memory"]),
        )


@dataclass(frozen=True)
class Allotment:
    #: Quantities set aside, by dimension: cpu, memory, disk and custom resources.
    resources: Resources = NOTHING
    #: The GPU indexes allotted (the execution sees only these cards).
    gpus: tuple[int, ...] = ()
    #: The GPUs allotted by UUID, with their shares (empty in allotments written before them).
    devices: tuple[DeviceShare, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.resources) or bool(self.gpus) or bool(self.devices)

    @property
    def cpu(self) -> float | None:
        return self.resources.get(CPU)

    @property
    def memory(self) -> int | None:
        value = self.resources.get(MEMORY)
        return None if value is None else int(value)

    @property
    def disk(self) -> int | None:
        value = self.resources.get(DISK)
        return None if value is None else int(value)

    @property
    def quantities(self) -> Resources:
        """Everything set aside as quantities, the GPUs included (shares as fractions): what counts against a worker."""
        if self.devices:
            return self.resources + Resources({GPU: sum(device.fraction for device in self.devices)})
        return self.resources + Resources({GPU: len(self.gpus)}) if self.gpus else self.resources

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: self.resources[name] for name in _TOP if name in self.resources}
        if self.gpus:
            data["gpus"] = list(self.gpus)
        if self.devices:
            data["devices"] = [device.to_json() for device in self.devices]
        custom = self.resources.custom
        if custom:
            data["resources"] = custom
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Allotment":
        """From the JSON form (``None`` or ``{}``: nothing set aside)."""
        if not data:
            return EMPTY
        quantities: dict[str, Quantity] = {name: data[name] for name in _TOP if data.get(name) is not None}
        quantities.update(data.get("resources") or {})
        devices = tuple(DeviceShare.from_json(device) for device in data.get("devices") or ())
        return cls(Resources(quantities), tuple(int(index) for index in data.get("gpus") or ()), devices)


EMPTY = Allotment()
