"""Per-execution ceilings for child processes: what the spec's "match is not enforce"
leaves to the host, done by the worker when it is asked to.

Two sources, both configured on the worker:

* ``subprocess_memory_limit`` (the spec's runner-level ceiling): the same address-space
  limit (RLIMIT_AS) for every child, whatever it requested.
* ``enforce_requests``: ceilings shaped by what the execution's placement set aside
  (its ``Allotment``, in the claimed job: the cpu and memory its request asked for).
  CPU: the child is pinned to ``ceil(cpu)`` cores (``sched_setaffinity``), chosen as
  the worker's least-used cores, and OMP/MKL/OpenBLAS/numexpr thread pools are sized
  to match. Memory: a cgroup v2 ``memory.max`` when the worker can create cgroups (the
  kernel then OOM-kills only that child), otherwise RLIMIT_AS; the worker logs which.

The allotted GPUs are always exported (``CUDA_VISIBLE_DEVICES``, by UUID), with the
share of a card an execution was given: the allotment is the only thing the ceilings
and the device pinning read.

RLIMIT_AS bounds virtual address space, not resident memory: it is a coarse but
portable ceiling (allocation fails with MemoryError instead of the host swapping).
"""

from __future__ import annotations

import logging
import math
import os
import resource
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from flux.domain.allotment import Allotment
from flux.worker import cgroups

log = logging.getLogger("flux.worker.runners.ceilings")

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
CGROUP_ROOT = Path(cgroups.DEFAULT_ROOT)


@dataclass
class Ceilings:
    """What the child applies to itself before user code runs (sent inside the job)."""

    memory: int | None = None
    #: Human wording for failures: "memory request" or "subprocess_memory_limit".
    memory_source: str | None = None
    #: True when a cgroup enforces memory, so the child must not also set RLIMIT_AS.
    memory_by_cgroup: bool = False
    cpus: list[int] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def reusable(self) -> bool:
        """Ceilings and device settings cannot be undone in a live process: such children retire."""
        return not (self.memory or self.cpus or self.env)

    def describe_memory(self) -> str:
        """The cause an attempt ends with when it hits this ceiling."""
        return f"memory limit {human_bytes(self.memory)} exceeded ({self.memory_source})"


def gpu_list(allotment: Allotment) -> str:
    """The allotted GPUs as ``CUDA_VISIBLE_DEVICES`` and docker's ``--gpus`` spell them: their
    UUIDs ("GPU-...,MIG-..."; a MIG slice has no index CUDA knows), or indexes ("0,2") in an
    allotment written before devices."""
    if allotment.devices:
        return ",".join(device.uuid for device in allotment.devices)
    return ",".join(str(index) for index in allotment.gpus)


def share_hints(allotment: Allotment) -> dict[str, str]:
    """For an execution sharing a card: its share, and the framework settings documented to
    keep a process within one (JAX's ``XLA_PYTHON_CLIENT_MEM_FRACTION``, TensorFlow's
    ``TF_FORCE_GPU_ALLOW_GROWTH``). PyTorch has no such variable: code reads ``FLUX_GPU_FRACTION``
    and calls ``torch.cuda.set_per_process_memory_fraction``. Hints, not isolation (docs/gpu.md)."""
    shares = [device for device in allotment.devices if not device.whole]
    if not shares:
        return {}
    share = shares[0]
    hints = {"FLUX_GPU_FRACTION": f"{share.fraction:g}", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    if share.fraction > 0:
        hints["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{share.fraction:.2f}"
        hints["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if share.memory:
        hints["FLUX_GPU_MEMORY"] = str(share.memory)
    return hints


def human_bytes(n: int) -> str:
    """ "2 GiB", "1.5 GiB", "512 MiB": for messages people read."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= factor:
            return f"{n // factor} {unit}" if n % factor == 0 else f"{n / factor:.1f} {unit}"
    return f"{n} B"


def apply_in_child(limits: Ceilings) -> None:
    """Called by the child process on itself, before it imports any user code."""
    os.environ.update(limits.env)
    if limits.cpus:
        os.sched_setaffinity(0, limits.cpus)
    if limits.memory and not limits.memory_by_cgroup:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))


class CoreAllotter:
    """Hands out the worker's least-used cores so pinned children spread out."""

    def __init__(self, cores: list[int] | None = None):
        self.cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
        self.in_use: Counter[int] = Counter()

    def take(self, count: int) -> list[int]:
        count = max(1, min(count, len(self.cores)))
        chosen = sorted(self.cores, key=lambda core: (self.in_use[core], core))[:count]
        self.in_use.update(chosen)
        return sorted(chosen)

    def release(self, cores: list[int]) -> None:
        self.in_use.subtract(cores)


class CgroupMemory:
    """A cgroup v2 child group per execution, under the worker's own cgroup."""

    def __init__(self, root: Path = CGROUP_ROOT):
        self.root = root

    def parent(self) -> Path | None:
        """The worker's cgroup if it is v2, has the memory controller and is writable."""
        relative = cgroups.own_membership().get("")
        if relative is None:  # not Linux, or no cgroup v2 hierarchy
            return None
        parent = self.root / relative.lstrip("/")
        controllers = parent / "cgroup.controllers"
        try:
            if "memory" not in controllers.read_text().split() or not os.access(parent, os.W_OK):
                return None
        except OSError:
            return None
        return parent

    def create(self, parent: Path, name: str, limit: int) -> Path:
        group = parent / name
        group.mkdir(exist_ok=True)
        (group / "memory.max").write_text(str(limit))
        if (group / "memory.swap.max").exists():
            (group / "memory.swap.max").write_text("0")  # a ceiling that swaps is no ceiling
        return group

    @staticmethod
    def add(group: Path, pid: int) -> None:
        (group / "cgroup.procs").write_text(str(pid))

    @staticmethod
    def oom_killed(group: Path) -> bool:
        try:
            events = dict(line.split() for line in (group / "memory.events").read_text().splitlines())
        except (OSError, ValueError):
            return False
        return int(events.get("oom_kill", 0)) > 0

    @staticmethod
    def remove(group: Path) -> None:
        try:
            group.rmdir()
        except OSError:
            log.debug("could not remove cgroup %s", group)


@dataclass
class CeilingPolicy:
    """The worker's settings; plans each execution's ceilings."""

    subprocess_memory_limit: int | None = None
    enforce_requests: bool = False
    cores: CoreAllotter = field(default_factory=CoreAllotter)
    cgroups: CgroupMemory = field(default_factory=CgroupMemory)

    def __post_init__(self) -> None:
        self._cgroup_parent = self.cgroups.parent() if self.enforce_requests else None
        if self.enforce_requests:
            how = (
                f"cgroup v2 memory.max under {self._cgroup_parent}"
                if self._cgroup_parent
                else "RLIMIT_AS (no writable cgroup v2 memory controller)"
            )
            log.info("enforcing requests: CPU by sched_setaffinity, memory by %s", how)

    def plan(self, allotment: Allotment) -> Ceilings:
        """The ceilings of one attempt, from what its placement set aside (and the worker's own)."""
        limits = Ceilings()
        if allotment.gpus:
            # NVML indexes follow PCI bus order; make CUDA number the cards the same way.
            limits.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            limits.env["CUDA_VISIBLE_DEVICES"] = gpu_list(allotment)
            limits.env.update(share_hints(allotment))
        if self.enforce_requests and allotment.memory:
            limits.memory, limits.memory_source = allotment.memory, "memory request"
            limits.memory_by_cgroup = self._cgroup_parent is not None
        elif self.subprocess_memory_limit:
            limits.memory, limits.memory_source = self.subprocess_memory_limit, "subprocess_memory_limit"
        if self.enforce_requests and allotment.cpu:
            limits.cpus = self.cores.take(math.ceil(allotment.cpu))
            limits.env.update({name: str(len(limits.cpus)) for name in THREAD_VARIABLES})
        return limits

    def cgroup_for(self, name: str, limits: Ceilings, pid: int) -> Path | None:
        """Put the child in a memory cgroup of its own (``name``: one per attempt); if the
        kernel refuses, RLIMIT_AS instead."""
        if not limits.memory_by_cgroup or self._cgroup_parent is None:
            return None
        try:
            group = self.cgroups.create(self._cgroup_parent, name, limits.memory)
            self.cgroups.add(group, pid)
            return group
        except OSError as exc:
            log.warning("cgroup memory limit unavailable (%s); using RLIMIT_AS for %s", exc, name)
            limits.memory_by_cgroup = False
            return None

    def release(self, limits: Ceilings) -> None:
        if limits.cpus:
            self.cores.release(limits.cpus)
