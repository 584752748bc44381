"""What dispatch knows about a worker at the moment of a claim: ``WorkerView`` snapshots.

No I/O: callers build views from whatever storage they use, as plain data by field
name (``worker_view``), and refresh a view's live sample with ``resampled``. What
each resource dimension means for a view (GPU usability, reserve accounting) lives
with that dimension's filter in ``flux.scheduling.filters``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from packaging.utils import canonicalize_name

from flux.domain.workers import AllocationMode, WorkerState


@dataclass(frozen=True)
class GPU:
    index: int
    uuid: str
    name: str
    memory_total: int
    memory_available: int
    utilization: float = 0.0


#: A GPU's fields, by name: what ``worker_view`` reads from each GPU mapping.
GPU_FIELDS = tuple(f.name for f in fields(GPU))
#: The sampled quantities of a view, by name (besides its GPUs and metrics).
SAMPLE_FIELDS = ("cpu_total", "cpu_available", "memory_total", "memory_available", "disk_total", "disk_free")


@dataclass
class WorkerView:
    """What dispatch knows about one worker at the moment of a claim."""

    name: str
    labels: dict[str, str]
    cpu_total: float
    cpu_available: float
    memory_total: int
    memory_available: int
    disk_total: int
    disk_free: int
    gpus: tuple[GPU, ...] = ()
    #: Installed distributions: canonical name -> version string.
    packages: dict[str, str] = field(default_factory=dict)
    #: How many executions it runs at once (its slots).
    max_concurrent_executions: int = 1
    #: Executions currently holding a slot.
    running: int = 0
    #: Registration order, the stable tie-break between equally loaded workers.
    registered_seq: int = 0
    #: Live metrics the worker publishes on heartbeats (name -> value), read by routing
    #: policies' ``metric(name)`` terms, including the built-ins ``flux.cpu_percent``
    #: and ``flux.memory_percent`` the worker computes from its sample; ``flux.running``
    #: is derived from ``running`` and never read from this dict.
    metrics: dict[str, float] = field(default_factory=dict)
    #: "sample" (the spec: thresholds on the last sample) or "reserve" (availability is
    #: also reduced by what running executions were allotted; see ``allocation``).
    allocation: str = AllocationMode.SAMPLE
    #: GPU index -> executions currently allotted that GPU.
    gpu_allotted: dict[int, int] = field(default_factory=dict)
    #: Countable custom resources the worker advertises (``--resource fpga=2``)...
    custom_total: dict[str, float] = field(default_factory=dict)
    #: ...and what is left of them (total minus running allotments, in either mode).
    custom_available: dict[str, float] | None = None
    #: ONLINE, or why it takes no new work: STALE (missed heartbeats) or DRAINING.
    state: str = WorkerState.ONLINE

    def __post_init__(self) -> None:
        if self.custom_available is None:
            self.custom_available = dict(self.custom_total)
        self.gpus = tuple(self.gpus)
        self.packages = {canonicalize_name(name): version for name, version in self.packages.items()}

    def evolve(self, **changes: Any) -> "WorkerView":
        """A shallow copy with some fields changed. Unlike ``dataclasses.replace`` it
        does not run ``__post_init__`` again: re-canonicalising ~120 package names per
        worker per dispatch round made a round over 1,000 workers take 200 ms."""
        view = copy.copy(self)
        for name, value in changes.items():
            setattr(view, name, value)
        return view

    @property
    def free_slots(self) -> int:
        """Slots new work may take: none while the worker is STALE or DRAINING."""
        return max(self.max_concurrent_executions - self.running, 0) if self.state == WorkerState.ONLINE else 0

    @property
    def load(self) -> float:
        return self.running / self.max_concurrent_executions if self.max_concurrent_executions > 0 else 1.0

    @property
    def reserves(self) -> bool:
        return self.allocation == AllocationMode.RESERVE


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    """Fields from plain data: GPUs may be mappings, non-finite metrics are dropped, and
    no dict is shared with the caller's data."""
    values = dict(data)
    if "gpus" in values:
        values["gpus"] = tuple(gpu if isinstance(gpu, GPU) else GPU(**gpu) for gpu in values["gpus"])
    if "metrics" in values:
        values["metrics"] = {name: value for name, value in (values["metrics"] or {}).items() if math.isfinite(value)}
    for name in ("labels", "packages", "custom_total"):
        if name in values:
            values[name] = dict(values[name] or {})
    return values


def worker_view(**data: Any) -> WorkerView:
    """A view from plain data, by ``WorkerView`` field name (GPUs as mappings of ``GPU_FIELDS``)."""
    return WorkerView(**_plain(data))


def resampled(view: WorkerView, **sample: Any) -> WorkerView:
    """``view`` with a new live sample (``SAMPLE_FIELDS``, ``gpus``, ``metrics``) and nothing
    else redone: its packages are not canonicalised again."""
    return view.evolve(**_plain(sample))
