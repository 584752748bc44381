"""What a container may use: the CPU quota and memory limit of this process's cgroup.

Inside a container psutil reports the host: a worker pod on a 512 GiB node would
advertise 512 GiB while its cgroup allows 8 GiB, and be given work it cannot hold.
The probe (``flux.worker.probe``) bounds its host figures by what this module reads, the
smaller of the two winning, as the JVM's and Go's container support do.

Read from the cgroup filesystem, ``FLUX_CGROUP_ROOT`` (``--cgroup-root``), default
``/sys/fs/cgroup``; a root that does not exist means no cgroup limits.

* cgroup v2 (a ``cgroup.controllers`` file at the root): ``cpu.max`` ("QUOTA PERIOD",
  or "max PERIOD": unlimited), ``memory.max`` ("max": unlimited), ``memory.current``
  and ``memory.stat``.
* cgroup v1 (``memory/`` and ``cpu/`` or ``cpu,cpuacct/`` below the root):
  ``cpu.cfs_quota_us`` (-1: unlimited) over ``cpu.cfs_period_us``,
  ``memory.limit_in_bytes`` (a huge number: unlimited), ``memory.usage_in_bytes`` and
  ``memory.stat``.

Which group: the one ``/proc/self/cgroup`` names, when it is visible under the root,
and every ancestor up to the root (a parent's limit binds its children too);
otherwise the root itself, which is what a container sees of its own group. Memory
in use is the working set, usage minus inactive file cache, the figure the kubelet
evicts on: page cache the kernel can drop does not count against what is free.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT_VARIABLE = "FLUX_CGROUP_ROOT"
DEFAULT_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = Path("/proc/self/cgroup")
#: cgroup v1 writes "no limit" as the largest page-aligned counter (2**63 - 4096 on x86-64).
V1_UNLIMITED = 2**62
#: Where cgroup v1 mounts the CPU controller: alone, or joined with cpuacct.
V1_CPU_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


@dataclass(frozen=True)
class CgroupLimits:
    """What the cgroup allows; ``None`` where it sets no limit (or cannot be read)."""

    version: int
    #: CPUs the quota allows (quota / period): 1.5 for Kubernetes' ``limits.cpu: 1500m``.
    cpus: float | None = None
    memory_limit: int | None = None
    #: Working set: bytes in use minus inactive file cache.
    memory_used: int | None = None


def default_root() -> str:
    return os.environ.get(ROOT_VARIABLE) or DEFAULT_ROOT


def membership(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller: path}; the v2 hierarchy is the key ``""``."""
    groups: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                groups[controller] = parts[2].strip()
    return groups


def own_membership(proc_cgroup: Path = PROC_CGROUP) -> dict[str, str]:
    try:
        return membership(proc_cgroup.read_text())
    except OSError:  # not Linux
        return {}


def _chain(mount: Path, relative: str | None) -> list[Path]:
    """This process's group under ``mount`` and its ancestors, deepest first."""
    relative = (relative or "").strip("/")
    leaf = mount / relative
    if not relative or not leaf.is_dir():
        return [mount]
    return [leaf, *[parent for parent in leaf.parents if parent.is_relative_to(mount)]]


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as file:  # no pathlib: this runs on every heartbeat
            return file.read().decode().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _smallest(values: list[float | int | None]) -> float | int | None:
    present = [value for value in values if value is not None]
    return min(present) if present else None


def _working_set(group: str, usage_file: str, inactive_keys: tuple[str, ...]) -> int | None:
    usage = _int(_read(f"{group}/{usage_file}"))
    if usage is None:
        return None
    stat = "\n" + (_read(f"{group}/memory.stat") or "")  # ~40 lines: only the key's is parsed
    inactive = next((_int(_line_value(stat, key)) for key in inactive_keys if f"\n{key} " in stat), None) or 0
    return max(usage - inactive, 0)


def _line_value(text: str, key: str) -> str:
    """The value on the line ``KEY VALUE`` of ``text`` (which starts with a line break)."""
    start = text.index(f"\n{key} ") + len(key) + 2
    end = text.find("\n", start)
    return text[start:] if end < 0 else text[start:end]


def _v2_cpus(group: str) -> float | None:
    fields = (_read(f"{group}/cpu.max") or "").split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    quota, period = _int(fields[0]), _int(fields[1])
    return quota / period if quota and period else None


def _v2_memory(group: str) -> int | None:
    text = _read(f"{group}/memory.max")
    return None if text == "max" else _int(text)


def _v1_cpus(group: str) -> float | None:
    quota, period = _int(_read(f"{group}/cpu.cfs_quota_us")), _int(_read(f"{group}/cpu.cfs_period_us"))
    return quota / period if quota is not None and quota > 0 and period else None


def _v1_memory(group: str) -> int | None:
    limit = _int(_read(f"{group}/memory.limit_in_bytes"))
    return limit if limit is not None and limit < V1_UNLIMITED else None


@dataclass(frozen=True)
class CgroupReader:
    """Where this process's limits are read: its groups, found once (the tree and its
    membership do not change under a running worker; the limits in them may, and are
    read again on each ``read``)."""

    version: int
    cpu_groups: tuple[str, ...] = ()
    memory_groups: tuple[str, ...] = ()

    @classmethod
    def find(cls, root: str | os.PathLike | None = None, proc_cgroup: Path = PROC_CGROUP) -> CgroupReader | None:
        """``None`` when there is no cgroup filesystem at ``root``."""
        base = Path(root if root is not None else default_root())
        if (base / "cgroup.controllers").is_file():
            chain = tuple(map(str, _chain(base, own_membership(proc_cgroup).get(""))))
            return cls(2, chain, chain)
        if (base / "memory").is_dir() or any((base / name).is_dir() for name in V1_CPU_MOUNTS):
            groups = own_membership(proc_cgroup)
            cpu_mount = next((base / name for name in V1_CPU_MOUNTS if (base / name).is_dir()), None)
            cpu_chain = _chain(cpu_mount, groups.get("cpu")) if cpu_mount else []
            memory_chain = _chain(base / "memory", groups.get("memory")) if (base / "memory").is_dir() else []
            return cls(1, tuple(map(str, cpu_chain)), tuple(map(str, memory_chain)))
        return None

    def read(self) -> CgroupLimits:
        if self.version == 2:
            return CgroupLimits(
                version=2,
                cpus=_smallest([_v2_cpus(group) for group in self.cpu_groups]),
                memory_limit=_smallest([_v2_memory(group) for group in self.memory_groups]),
                memory_used=_working_set(self.memory_groups[0], "memory.current", ("inactive_file",)),
            )
        return CgroupLimits(
            version=1,
            cpus=_smallest([_v1_cpus(group) for group in self.cpu_groups]),
            memory_limit=_smallest([_v1_memory(group) for group in self.memory_groups]),
            memory_used=_working_set(
                self.memory_groups[0], "memory.usage_in_bytes", ("total_inactive_file", "inactive_file")
            )
            if self.memory_groups
            else None,
        )


def read_limits(root: str | os.PathLike | None = None, proc_cgroup: Path = PROC_CGROUP) -> CgroupLimits | None:
    """This process's cgroup limits, or ``None`` when there is no cgroup filesystem at ``root``."""
    reader = CgroupReader.find(root, proc_cgroup)
    return reader.read() if reader is not None else None
