"""Allotment: what a placement set aside on a worker for one execution.

The one road from what dispatch decided to what the worker enforces: the server
records it with the claim (``WORKFLOW_CLAIMED`` and ``GET .../explain`` show it),
the claimed job carries it, and the runner's ceilings (cpu, memory) and device
pinning (GPU indexes) read it and nothing else.

Its JSON form is the one the API has always shown: the well-known quantities at
the top (``cpu``, ``memory``, ``disk``), ``gpus`` as indexes and custom resources
under ``resources``; a dimension nothing was set aside for is absent.
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
class Allotment:
    #: Quantities set aside, by dimension: cpu, memory, disk and custom resources.
    resources: Resources = NOTHING
    #: The GPU indexes allotted (the execution sees only these cards).
    gpus: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.resources) or bool(self.gpus)

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
        """Everything set aside as quantities, the GPU count included: what counts against a worker."""
        return self.resources + Resources({GPU: len(self.gpus)}) if self.gpus else self.resources

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: self.resources[name] for name in _TOP if name in self.resources}
        if self.gpus:
            data["gpus"] = list(self.gpus)
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
        return cls(Resources(quantities), tuple(int(index) for index in data.get("gpus") or ()))


EMPTY = Allotment()
