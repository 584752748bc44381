"""Matching executions to workers: pure functions the dispatcher calls on every claim.

Placement has two stages. Eligibility is hard: label affinity is checked first (a
dict lookup, the cheapest way to rule a worker out), then the resource request as a
threshold model, where every declared dimension must satisfy ``worker >= request``.
Choice is soft: among eligible workers the first in ``candidate_order`` wins, which
is least-loaded first, the same spreading default as Kubernetes' LeastAllocated
score and Nomad's spread scheduler, so work fans out instead of piling onto the
first worker that registered.

A match is not enforcement: it only decides where an execution goes. Nothing here
caps what the execution then uses; that ceiling comes from the runner or the host.

No I/O: callers build ``WorkerView`` snapshots from whatever storage they use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from flux.domain.resource_request import ResourceRequest


@dataclass(frozen=True)
class GPU:
    index: int
    uuid: str
    name: str
    memory_total: int
    memory_available: int
    utilization: float = 0.0


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
    #: max_concurrent_executions.
    slots: int = 1
    #: Executions currently holding a slot.
    running: int = 0
    #: Registration order, the stable tie-break between equally loaded workers.
    registered_seq: int = 0

    def __post_init__(self) -> None:
        self.gpus = tuple(self.gpus)
        self.packages = {canonicalize_name(name): version for name, version in self.packages.items()}

    @property
    def free_slots(self) -> int:
        return max(self.slots - self.running, 0)

    @property
    def load(self) -> float:
        return self.running / self.slots if self.slots > 0 else 1.0

    @property
    def usable_gpus(self) -> int:
        return sum(1 for gpu in self.gpus if gpu.memory_available > 0)


@dataclass(frozen=True)
class Mismatch:
    """Why a worker is not eligible: the first failing dimension, in human terms."""

    kind: str  # "affinity", "cpu", "memory", "disk", "gpu" or "package"
    message: str


_BINARY_UNITS = (("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024))


def _bytes(available: int, requested: int) -> tuple[str, str]:
    """Both sides in the requested amount's unit ("4.0Gi", "8.0Gi"); exact bytes if rounding hides the gap."""
    for unit, factor in _BINARY_UNITS:
        if requested >= factor:
            shown = f"{available / factor:.1f}{unit}", f"{requested / factor:.1f}{unit}"
            if shown[0] != shown[1]:
                return shown
            break
    return str(available), str(requested)


def check_affinity(affinity: Mapping[str, str] | None, labels: Mapping[str, str]) -> Mismatch | None:
    """Every affinity entry must equal the worker's label of the same key (as strings)."""
    for key, wanted in (affinity or {}).items():
        if key not in labels:
            return Mismatch("affinity", f"label {key} missing, wanted {wanted}")
        if str(labels[key]) != str(wanted):
            return Mismatch("affinity", f"label {key}={labels[key]}, wanted {wanted}")
    return None


def _check_package(requirement: Requirement, installed: Mapping[str, str]) -> Mismatch | None:
    name = canonicalize_name(requirement.name)
    if name not in installed:
        return Mismatch("package", f"package {name} not installed")
    try:
        version = Version(installed[name])
    except InvalidVersion:
        return Mismatch("package", f"package {name} has unparseable version {installed[name]!r}")
    if not requirement.specifier.contains(version, prereleases=True):
        return Mismatch("package", f"package {name} {installed[name]} does not satisfy {requirement.specifier}")
    return None


def check_resources(request: ResourceRequest | None, worker: WorkerView) -> Mismatch | None:
    """The first requested dimension (cpu, memory, disk, gpu, packages) the worker falls short on."""
    if request is None:
        return None
    if request.cpu is not None and worker.cpu_available < request.cpu:
        return Mismatch("cpu", f"cpu_available {worker.cpu_available} < requested {request.cpu:g}")
    if request.memory is not None and worker.memory_available < request.memory:
        have, want = _bytes(worker.memory_available, request.memory)
        return Mismatch("memory", f"memory_available {have} < requested {want}")
    if request.disk is not None and worker.disk_free < request.disk:
        have, want = _bytes(worker.disk_free, request.disk)
        return Mismatch("disk", f"disk_free {have} < requested {want}")
    if request.gpu is not None and worker.usable_gpus < request.gpu:
        return Mismatch("gpu", f"gpus with free memory {worker.usable_gpus} < requested {request.gpu}")
    for requirement in request.requirements:
        if mismatch := _check_package(requirement, worker.packages):
            return mismatch
    return None


def check(
    request: ResourceRequest | None, affinity: Mapping[str, str] | None, worker: WorkerView
) -> Mismatch | None:
    """Affinity first, resources second; ``None`` means the worker is eligible."""
    return check_affinity(affinity, worker.labels) or check_resources(request, worker)


def is_unconstrained(request: ResourceRequest | None, affinity: Mapping[str, str] | None) -> bool:
    return (request is None or request.is_empty) and not affinity


def candidate_key(worker: WorkerView) -> tuple:
    """Least-loaded first, then fewer running, then registration order: a stable order."""
    return (worker.load, worker.running, worker.registered_seq, worker.name)


def candidate_order(workers: Iterable[WorkerView]) -> list[WorkerView]:
    """Workers with a free slot, in ``candidate_key`` order."""
    free = [worker for worker in workers if worker.free_slots > 0]
    return sorted(free, key=candidate_key)


def select_worker(
    request: ResourceRequest | None, affinity: Mapping[str, str] | None, workers: Iterable[WorkerView]
) -> WorkerView | None:
    """The first eligible worker in ``candidate_order``, or ``None`` (the execution stays SCHEDULED).

    Unconstrained work takes the fast path: no per-candidate check at all.
    """
    candidates = candidate_order(workers)
    if is_unconstrained(request, affinity):
        return candidates[0] if candidates else None
    return next((worker for worker in candidates if check(request, affinity, worker) is None), None)
