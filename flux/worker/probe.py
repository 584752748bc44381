"""Worker resource probe: what a worker publishes at registration and on heartbeats.

Pure data out, no HTTP. Nothing here raises because a GPU could not be found.

GPU detection (NVIDIA only): each card, and each MIG slice of a card in MIG mode as a
device of its own (``parent``: its card), with its compute capability and its health
(``flux.worker.gpu_health``); the worker also publishes ``flux.gpu/*`` labels
(``flux.domain.devices``).

* NVML first, through ``nvidia-ml-py`` (``import pynvml``). It talks to the
  driver's own ``libnvidia-ml`` in-process: no subprocess, no ``nvidia-smi``
  needed on PATH, only a loaded driver.
* ``GPUtil`` is the documented fallback (optional extra ``flux-engine[gputil]``).
  It shells out to ``nvidia-smi``, so it is only tried when ``nvidia-smi`` is on
  PATH.
* Otherwise no GPUs. Each reason is logged at DEBUG on the ``flux.worker.probe`` logger,
  and the worker tells them at INFO when it registers (``nvml_devices.explained``).

Non-NVIDIA accelerators (ROCm, Intel, Apple Silicon, TPUs) are never detected;
advertise them with labels (``--label accelerator=rocm``) and route by affinity.

CPU model: ``cpu_total`` is the host's logical CPU count, bounded by the cgroup's CPU
quota (``flux.worker.cgroups``: a pod's ``limits.cpu``). ``cpu_available`` is the number of
logical CPUs this worker may schedule on -- its affinity mask
(``os.sched_getaffinity``), which honours cgroup cpusets, ``taskset`` and similar
pinning -- bounded by ``cpu_total``, so ``cpu=4`` matches a worker pinned to at
least 4 cores under a quota of at least 4. It is not reduced by load; live
utilisation is published separately as ``cpu_percent`` (the host's).

Memory: the host's, bounded by the cgroup's memory limit; available memory is also
bounded by the limit minus the cgroup's working set. Disk: the filesystem holding
``disk_path`` (the worker's working directory unless told otherwise).
"""

from __future__ import annotations

import logging
import os
import platform
import re
import shutil
import socket
import time
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

import psutil

from flux.domain.devices import gpu_labels
from flux.domain.resources import Resources
from flux.domain.samples import to_wire
from flux.objects import import_object
from flux.worker import cgroups
from flux.worker.nvml_devices import _detect_nvml, driver_version, no_gpus, number, text, utilization

logger = logging.getLogger("flux.worker.probe")

GPU_SOURCES = ("auto", "nvml", "gputil", "none")
#: Seconds before a worker that found no GPU looks again (``Sampler``): trying a binding
#: that is not installed, or a driver that is not loaded, costs ~0.3-1 ms on every beat.
GPU_RETRY = 60.0

_MIB = 1024 * 1024
#: PEP 503's name normalization, as ``packaging.utils.canonicalize_name`` does it: the
#: worker would otherwise import packaging (with its wheel tags) for this line alone
#: (~5 ms of its start; tests/worker/test_probe.py checks the two agree).
_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    return _SEPARATORS.sub("-", name).lower()


def visible(gpus: list[dict], cuda_visible_devices: str | None) -> list[dict]:
    """The GPUs a worker started with ``CUDA_VISIBLE_DEVICES`` may use.

    NVML sees every card on the host whatever that variable says; a worker pinned to
    one card (the spec's one-worker-per-GPU layout) must advertise only that card.
    Entries may be indexes (of cards) or UUIDs (or UUID prefixes), as CUDA accepts. A
    chosen card brings its MIG slices; a slice chosen without its card (the spec's
    one-worker-per-slice layout) is this worker's device on its own, as a card would be.
    """
    if cuda_visible_devices is None:
        return gpus
    wanted = [entry.strip() for entry in cuda_visible_devices.split(",") if entry.strip()]
    chosen: list[dict] = []
    for entry in wanted:
        if entry.startswith("-"):
            break  # CUDA stops at the first invalid entry; "-1" hides every card
        match = next(
            (g for g in gpus if (str(g["index"]) == entry and not g.get("parent")) or g["uuid"].startswith(entry)), None
        )
        if match is None:
            break
        for device in [match, *(g for g in gpus if g.get("parent") == match["uuid"])]:
            if device not in chosen:
                chosen.append(device)
    cards = {g["uuid"] for g in chosen}
    chosen = [{**g, "parent": None} if g.get("parent") and g["parent"] not in cards else g for g in chosen]
    if not chosen and gpus:
        no_gpus("no GPUs: CUDA_VISIBLE_DEVICES=%r hides all %d", cuda_visible_devices, len(gpus))
    elif len(chosen) < len(gpus):
        logger.debug("CUDA_VISIBLE_DEVICES=%r: advertising %d of %d GPUs", cuda_visible_devices, len(chosen), len(gpus))
    return chosen


def _detect_gputil(gputil: Any = None) -> list[dict]:
    """GPUs via GPUtil (which runs nvidia-smi); [] with the reason logged."""
    if gputil is None:
        try:
            import GPUtil as gputil
        except Exception as exc:  # ImportError, or GPUtil's own import breaking
            no_gpus("no GPUs via GPUtil: GPUtil not installed (%s)", exc)
            return []
    if shutil.which("nvidia-smi") is None:
        no_gpus("no GPUs via GPUtil: nvidia-smi not on PATH")
        return []
    try:
        found = gputil.getGPUs()
    except Exception as exc:
        no_gpus("no GPUs via GPUtil: GPUtil.getGPUs() failed: %s", exc)
        return []
    gpus = [
        {
            "index": int(g.id),
            "uuid": text(g.uuid),
            "name": text(g.name),
            "memory_total": int(number(g.memoryTotal) * _MIB),
            "memory_available": int(number(g.memoryFree) * _MIB),
            "utilization": utilization(number(g.load) * 100.0),
        }
        for g in found
    ]
    if not gpus:
        no_gpus("no GPUs: GPUtil/nvidia-smi reports 0 devices")
    return gpus


def detect_gpus(source: str = "auto", *, nvml: Any = None, gputil: Any = None) -> list[dict]:
    """NVIDIA GPUs visible to this worker. Never raises; failure means ``[]``.

    ``source``: "auto" (NVML, then GPUtil), "nvml", "gputil", "none", or
    "nvml:module:attribute" for another NVML-compatible binding (a vendor shim, or a
    test's fake). ``nvml``/``gputil`` replace the real modules (tests). Either way,
    an inherited ``CUDA_VISIBLE_DEVICES`` limits the result (see ``visible``).
    """
    return visible(_detect(source, nvml, gputil), os.environ.get("CUDA_VISIBLE_DEVICES"))


def _detect(source: str, nvml: Any, gputil: Any) -> list[dict]:
    try:
        if source.startswith("nvml:"):
            return _detect_nvml(import_object(source[len("nvml:") :])) or []
        if source == "none":
            no_gpus("no GPUs: GPU detection disabled (--gpu-source none)")
            return []
        if source == "nvml":
            return _detect_nvml(nvml) or []
        if source == "gputil":
            return _detect_gputil(gputil)
        if source == "auto":
            gpus = _detect_nvml(nvml)
            if gpus is not None:
                return gpus
            return _detect_gputil(gputil)
        logger.warning("no GPUs: unknown GPU source %r (expected one of %s)", source, GPU_SOURCES)
        no_gpus("no GPUs: unknown GPU source %r", source)
        return []
    except Exception as exc:  # belt and braces: a probe must never break registration
        no_gpus("no GPUs: GPU probe failed unexpectedly: %r", exc)
        return []


def installed_packages() -> dict[str, str]:
    """Installed distributions as {PEP 503 canonical name: version}.

    Nameless distributions are skipped; when a name appears twice on sys.path
    the first one (the one that would be imported) wins.
    """
    packages: dict[str, str] = {}
    for dist in metadata.distributions():
        name, version = _name_and_version(dist)
        if not name:
            continue
        packages.setdefault(canonical_name(name), version or "")
    return packages


def _name_and_version(dist: metadata.Distribution) -> tuple[str | None, str | None]:
    """Name and Version from the metadata's header lines. ``dist.metadata`` would parse
    the whole file as an e-mail message, twice per package with ``dist.version``: ~1 ms
    each, a fifth of a second of every worker's start for 150 packages."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name = version = None
    for line in text.splitlines():
        if not line:  # the headers end at the first blank line
            break
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
    return name, version


def runtime_info() -> dict:
    return {
        "python_version": platform.python_version(),
        "os_name": platform.system(),
        "os_version": platform.release(),
        "hostname": socket.gethostname(),
        "cpu_arch": platform.machine(),
    }


def _cpu_counts(limits: cgroups.CgroupLimits | None) -> tuple[float, float]:
    total = float(psutil.cpu_count(logical=True) or os.cpu_count() or 1)
    if limits is not None and limits.cpus is not None:
        total = min(total, limits.cpus)
    try:
        available = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        available = total
    return total, min(available, total)


def _memory(limits: cgroups.CgroupLimits | None) -> tuple[int, int]:
    vm = psutil.virtual_memory()
    total, available = int(vm.total), int(vm.available)
    if limits is not None and limits.memory_limit is not None:
        total = min(total, limits.memory_limit)
        if limits.memory_used is not None:
            available = min(available, max(limits.memory_limit - limits.memory_used, 0))
    return total, min(available, total)


def sample_resources(
    disk_path: str = ".",
    gpu_source: str = "auto",
    *,
    nvml: Any = None,
    gputil: Any = None,
    cgroup_root: str | None = None,
) -> dict:
    """One snapshot of this worker's capacity, bounded by its cgroup's limits, in its wire
    form (``flux.domain.samples.to_wire``); see ``Sampler.sample``."""
    return Sampler(disk_path, gpu_source, cgroup_root).sample(nvml=nvml, gputil=gputil)


class Sampler:
    """The samples of one worker, beat after beat. What cannot change under a running
    worker is found once (its cgroups, ``cgroups.CgroupReader``); a worker that found no
    GPU looks again every ``gpu_retry`` seconds, not on every beat, while one with GPUs
    reads them on every beat (a card that failed or left is seen at once).
    ``cgroup_root``: where to read cgroup limits (``flux.worker.cgroups``; None: the
    ``FLUX_CGROUP_ROOT`` setting)."""

    def __init__(
        self, disk_path: str = ".", gpu_source: str = "auto", cgroup_root: str | None = None, gpu_retry: float = 0.0
    ):
        self.disk_path, self.gpu_source, self.gpu_retry = disk_path, gpu_source, gpu_retry
        self._cgroups = cgroups.CgroupReader.find(cgroup_root)
        self._gpus_again = 0.0  # monotonic time before which no GPU is looked for

    def reads_devices(self) -> bool:
        """Whether the next sample asks a GPU driver (which can keep it waiting: the
        heartbeat takes it off its event loop), or only reads /proc and /sys."""
        return self.gpu_source != "none" and time.monotonic() >= self._gpus_again

    def sample(self, *, nvml: Any = None, gputil: Any = None) -> dict:
        """``cpu_available`` is the count of logical CPUs in this process's affinity
        mask (cgroup cpusets, taskset, pinning), not load-adjusted; live load is
        ``cpu_percent`` (psutil.cpu_percent(interval=None): since the previous
        call, 0.0 on the very first). Memory and disk figures are bytes."""
        limits = self._cgroups.read() if self._cgroups is not None else None
        cpu_total, cpu_available = _cpu_counts(limits)
        memory_total, memory_available = _memory(limits)
        disk = psutil.disk_usage(self.disk_path)
        # Each probed dimension: what the worker has and what is available now, by name. A
        # new one is a pair of entries here (and its filter, flux/scheduling/filters/capacity.py).
        total = Resources(cpu=cpu_total, memory=memory_total, disk=int(disk.total))
        available = Resources(cpu=cpu_available, memory=memory_available, disk=int(disk.free))
        return {
            **to_wire(total, available),
            "cpu_percent": float(psutil.cpu_percent(interval=None)),
            "gpus": self._gpus(nvml, gputil),
            "sampled_at": datetime.now(UTC).isoformat(),
        }

    def _gpus(self, nvml: Any, gputil: Any) -> list[dict]:
        now = time.monotonic()
        if now < self._gpus_again:
            return []
        gpus = detect_gpus(self.gpu_source, nvml=nvml, gputil=gputil)
        if not gpus:
            self._gpus_again = now + self.gpu_retry
        return gpus


def get_resources_info(
    labels: dict[str, str] | None = None,
    max_concurrent_executions: int = 1,
    disk_path: str = ".",
    gpu_source: str = "auto",
    cgroup_root: str | None = None,
) -> dict:
    """The full registration payload for POST /workers/register: the labels given, over the
    ``flux.gpu/*`` labels of its GPUs (``flux.domain.devices``)."""
    packages = installed_packages()
    resources = sample_resources(disk_path, gpu_source, cgroup_root=cgroup_root)
    published = gpu_labels(resources["gpus"], driver_version(gpu_source) if resources["gpus"] else None)
    return {
        "resources": resources,
        "packages": [{"name": n, "version": packages[n]} for n in sorted(packages)],
        "runtime": runtime_info(),
        "labels": {**published, **(labels or {})},
        "max_concurrent_executions": max_concurrent_executions,
    }
