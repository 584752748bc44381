"""What dispatch knows about a worker at the moment of a claim: ``WorkerView`` snapshots.

No I/O: callers build views from whatever storage they use, as plain data by field
name (``worker_view``), and refresh a view's live sample with ``resampled``. A view's
quantities are data: ``total`` and ``available`` map each dimension's name (cpu,
memory, disk, any other probed one, and the custom resources the worker advertises)
to a quantity, so a new dimension needs no field here. What each dimension means for
a view (GPU usability, reserve accounting) lives with that dimension's filter in
``flux.scheduling.filters``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from packaging.utils import canonicalize_name

from flux.domain.resources import Resources
from flux.domain.workers import AllocationMode, WorkerState


@dataclass(frozen=True)
class GPU:
    """One device: a card, or a MIG slice of one (``parent`` set), as the probe saw it."""

    index: int
    uuid: str
    name: str
    memory_total: int
    memory_available: int
    utilization: float = 0.0
    #: "9.0" (NVML's major.minor), when known.
    compute_capability: str | None = None
    #: A card split into MIG slices: its slices are the devices, it is never allotted itself.
    mig: bool = False
    #: A slice's profile ("1g.10gb").
    mig_profile: str | None = None
    #: A slice's card, by UUID.
    parent: str | None = None
    #: Why the worker found it in trouble (an XID, uncorrectable ECC errors...); ``None``: healthy.
    unhealthy: str | None = None


#: A GPU's fields, by name: what ``worker_view`` reads from each GPU mapping.
GPU_FIELDS = tuple(f.name for f in fields(GPU))
NOTHING = Resources()


@dataclass
class WorkerView:
    """What dispatch knows about one worker at the moment of a claim."""

    name: str
    labels: dict[str, str]
    #: What it has, by dimension: the probed quantities (cpu, memory, disk...) and the
    #: countable custom resources it advertises (``--resource fpga=2``).
    total: Resources = NOTHING
    #: What is left of it: the last sample of each probed quantity (under reserve also
    #: less what running executions were allotted) and each custom resource's total
    #: less what running executions hold. ``None``: all of ``total``.
    available: Resources | None = None
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
    #: GPU index -> executions currently allotted that GPU whole.
    gpu_allotted: dict[int, int] = field(default_factory=dict)
    #: GPU index -> (fraction, bytes of memory) allotted to executions sharing that card.
    gpu_shared: dict[int, tuple[float, int]] = field(default_factory=dict)
    #: ONLINE, or why it takes no new work: STALE (missed heartbeats) or DRAINING.
    state: str = WorkerState.ONLINE
    #: The namespaces it is restricted to (``flux start worker --namespace``); None: every one.
    namespaces: frozenset[str] | None = None

    def __post_init__(self) -> None:
        self.total = _resources(self.total)
        self.available = self.total if self.available is None else _resources(self.available)
        self.gpus = tuple(sorted(self.gpus, key=lambda gpu: gpu.index))  # by index: ``choose`` relies on it
        self.packages = {canonicalize_name(name): version for name, version in self.packages.items()}

    def evolve(self, **changes: Any) -> "WorkerView":
        """A shallow copy with some fields changed. Unlike ``dataclasses.replace`` it
        does not run ``__post_init__`` again: re-canonicalising ~120 package names per
        worker per dispatch round made a round over 1,000 workers take 200 ms."""
        view = object.__new__(WorkerView)  # the copy module's protocol walk cost more than the copy itself
        view.__dict__.update(self.__dict__)
        view.__dict__.update(changes)
        return view

    @property
    def shown_state(self) -> str:
        """The state people see (``flux worker list``): a draining worker that runs nothing is DRAINED."""
        return WorkerState.DRAINED if self.state == WorkerState.DRAINING and self.running == 0 else self.state

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


def _resources(value: Mapping[str, Any]) -> Resources:
    return value if isinstance(value, Resources) else Resources(value)


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    """Fields from plain data: quantities and GPUs may be mappings, non-finite metrics are
    dropped, and no dict is shared with the caller's data."""
    values = dict(data)
    for name in ("total", "available"):
        if values.get(name) is not None:
            values[name] = _resources(values[name])
    if "gpus" in values:
        values["gpus"] = tuple(gpu if isinstance(gpu, GPU) else GPU(**gpu) for gpu in values["gpus"])
    if "metrics" in values:
        values["metrics"] = {name: value for name, value in (values["metrics"] or {}).items() if math.isfinite(value)}
    for name in ("labels", "packages"):
        if name in values:
            values[name] = dict(values[name] or {})
    if "namespaces" in values:  # an empty restriction is none
        values["namespaces"] = frozenset(values["namespaces"]) if values["namespaces"] else None
    return values


def worker_view(**data: Any) -> WorkerView:
    """A view from plain data, by ``WorkerView`` field name (quantities as mappings of
    dimension to quantity, GPUs as mappings of ``GPU_FIELDS``)."""
    return WorkerView(**_plain(data))


def resampled(view: WorkerView, **sample: Any) -> WorkerView:
    """``view`` with a new live sample (``total``, ``available``, ``gpus``, ``metrics``) and
    nothing else redone: its packages are not canonicalised again."""
    return view.evolve(**_plain(sample))
