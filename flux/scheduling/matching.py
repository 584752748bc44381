"""Matching executions to workers: pure functions placement calls in every dispatch round.

Placement has two stages. Eligibility is hard: label affinity is checked first (a
dict lookup, the cheapest way to rule a worker out), then the resource request as a
threshold model, where every declared dimension must satisfy ``worker >= request``.
Choice is soft and made by ``best`` (``placement.place`` keeps the same order in a
heap; ``select_worker`` is the one-execution form): without a routing policy the
first eligible worker in ``candidate_order`` wins, which is least-loaded first, the same spreading default as
Kubernetes' LeastAllocated score and Nomad's spread scheduler, so work fans out
instead of piling onto the first worker that registered. With a routing policy
(``flux.domain.routing``) the eligible worker with the highest score wins, ties
broken by that same least-loaded order. A policy only ever ranks workers that
already passed the eligibility check, so it can never pick an ineligible one.

A match is not enforcement: it only decides where an execution goes. Nothing here
caps what the execution then uses; that ceiling comes from the runner or the host.

No I/O: callers build ``WorkerView`` snapshots from whatever storage they use.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from flux.domain.affinity import label_mismatch
from flux.domain.resource_request import ResourceRequest
from flux.domain.routing import RoutingPolicy
from flux.scheduling.scoring import score_value


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
    #: Live metrics the worker publishes on heartbeats (name -> value), read by routing
    #: policies' ``metric(name)`` terms, including the built-ins ``flux.cpu_percent``
    #: and ``flux.memory_percent`` the worker computes from its sample; ``flux.running``
    #: is derived from ``running`` and never read from this dict.
    metrics: dict[str, float] = field(default_factory=dict)
    #: "sample" (the spec: thresholds on the last sample) or "reserve" (availability is
    #: also reduced by what running executions were allotted; see ``allocation``).
    allocation: str = "sample"
    #: GPU index -> executions currently allotted that GPU.
    gpu_allotted: dict[int, int] = field(default_factory=dict)
    #: Countable custom resources the worker advertises (``--resource fpga=2``)...
    custom_total: dict[str, float] = field(default_factory=dict)
    #: ...and what is left of them (total minus running allotments, in either mode).
    custom_available: dict[str, float] | None = None
    #: ONLINE, or why it takes no new work: STALE (missed heartbeats) or DRAINING.
    state: str = "ONLINE"

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
        return max(self.slots - self.running, 0) if self.state == "ONLINE" else 0

    @property
    def load(self) -> float:
        return self.running / self.slots if self.slots > 0 else 1.0

    @property
    def reserves(self) -> bool:
        return self.allocation == "reserve"

    def gpu_is_usable(self, gpu: GPU) -> bool:
        """Free memory (the spec's test); under reserve also not allotted to another execution."""
        return gpu.memory_available > 0 and not (self.reserves and self.gpu_allotted.get(gpu.index, 0))

    @property
    def usable_gpus(self) -> int:
        return sum(1 for gpu in self.gpus if self.gpu_is_usable(gpu))


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


def check_affinity(affinity: Mapping[str, Any] | None, labels: Mapping[str, str]) -> Mismatch | None:
    """The first affinity entry the worker's labels fail, or ``None`` when all hold.

    ``affinity`` is the JSON form (``flux.domain.affinity``): a string value means the
    label must equal it (as strings); an operator dict (``{"op": "In", "values": [...]}``,
    ``Exists``, ``Gt``...) or operator object applies that operator. Entries are
    checked in the mapping's order. Messages carry the values, e.g.
    ``label cuda=11, wanted > 12``.
    """
    for key, wanted in (affinity or {}).items():
        if isinstance(wanted, str):
            # Equality, the common case, inline: a dict lookup and a compare.
            label = labels.get(key)
            if label is not None and (label == wanted or str(label) == wanted):
                continue
        message = label_mismatch(key, wanted, labels)
        if message is not None:
            return Mismatch("affinity", message)
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
    after = " after reservations" if worker.reserves else ""
    if request.cpu is not None and worker.cpu_available < request.cpu:
        return Mismatch("cpu", f"cpu_available {worker.cpu_available}{after} < requested {request.cpu:g}")
    if request.memory is not None and worker.memory_available < request.memory:
        have, want = _bytes(worker.memory_available, request.memory)
        return Mismatch("memory", f"memory_available {have}{after} < requested {want}")
    if request.disk is not None and worker.disk_free < request.disk:
        have, want = _bytes(worker.disk_free, request.disk)
        return Mismatch("disk", f"disk_free {have}{after} < requested {want}")
    if request.gpu is not None and worker.usable_gpus < request.gpu:
        what = "unallotted gpus with free memory" if worker.reserves else "gpus with free memory"
        return Mismatch("gpu", f"{what} {worker.usable_gpus} < requested {request.gpu}")
    for requirement in request.requirements:
        if mismatch := _check_package(requirement, worker.packages):
            return mismatch
    for name, amount in request.resources:
        have = worker.custom_available.get(name, 0.0)
        if have < amount:
            return Mismatch(f"resource:{name}", f"resource {name} {have:g}{after} < requested {amount:g}")
    return None


def check(
    request: ResourceRequest | None, affinity: Mapping[str, Any] | None, worker: WorkerView
) -> Mismatch | None:
    """Affinity first, resources second; ``None`` means the worker is eligible."""
    return check_affinity(affinity, worker.labels) or check_resources(request, worker)


def is_unconstrained(request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
    return (request is None or request.is_empty) and not affinity


def candidate_key(worker: WorkerView) -> tuple:
    """Least-loaded first, then fewer running, then registration order: a stable order."""
    return (worker.load, worker.running, worker.registered_seq, worker.name)


def candidate_order(workers: Iterable[WorkerView]) -> list[WorkerView]:
    """Workers with a free slot, in ``candidate_key`` order."""
    free = [worker for worker in workers if worker.free_slots > 0]
    return sorted(free, key=candidate_key)


def best(pool: Sequence[WorkerView], routing: RoutingPolicy | None = None) -> WorkerView | None:
    """The worker to choose from ``pool`` (eligible workers with a free slot), or ``None``.

    Without a policy: the least loaded (minimum ``candidate_key``). With one: the
    highest ``score_value``, ties broken by ``candidate_key``. The only selection rule.
    """
    if not pool:
        return None
    if routing is None:
        return min(pool, key=candidate_key)
    return min(pool, key=lambda worker: (-score_value(routing, worker), candidate_key(worker)))


def select_worker(
    request: ResourceRequest | None,
    affinity: Mapping[str, Any] | None,
    workers: Iterable[WorkerView],
    routing: RoutingPolicy | None = None,
) -> WorkerView | None:
    """The ``best`` eligible worker with a free slot, or ``None`` (the execution stays SCHEDULED).

    Unconstrained work takes the fast path: no per-candidate check at all.
    """
    candidates = [worker for worker in workers if worker.free_slots > 0]
    if not is_unconstrained(request, affinity):
        candidates = [worker for worker in candidates if check(request, affinity, worker) is None]
    return best(candidates, routing)
