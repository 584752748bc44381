"""What a worker publishes: its registration payload and its heartbeats.

A heartbeat is liveness, plus a fresh resource sample only when it moved materially
(``flux.domain.samples``): freed memory and a GPU that failed or left are seen within
one beat, a GPU attached to a worker that had none within ``probe.GPU_RETRY``, and an
idle worker's beat is a few bytes that cost the server no database write. The reply
names executions to cancel (a user asked) and to abandon (their attempt went elsewhere:
fenced). What a worker advertises is logged at INFO each time it registers (``offered``).

Both go out as ``flux.protocol`` messages; the probe's sample (a dict, which
``flux.domain.samples`` compares) becomes one in ``resources_message`` alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any, Awaitable, Callable, Mapping

from flux.domain.numbers import human_size
from flux.domain.samples import metrics_changed, resources_changed
from flux.domain.workers import WorkerState
from flux.objects import import_object
from flux.protocol.heartbeat import Heartbeat, HeartbeatReply
from flux.protocol.registration import PackageInfo, RegistrationReply, ResourcesInfo, RuntimeInfo, WorkerRegistration
from flux.worker import probe
from flux.worker.config import WorkerConfig
from flux.worker.nvml_devices import explained
from flux.worker.running import Executions

log = logging.getLogger("flux.worker")


def resources_message(sample: Mapping[str, Any]) -> ResourcesInfo:
    """A sample of the probe (``flux.worker.probe.sample_resources``) as the protocol's
    message: the one place where its shape meets the wire's."""
    return ResourcesInfo.model_validate(sample)


def offered(sent: WorkerRegistration, gpu_reasons: list[str]) -> str:
    """What a worker advertises, for its INFO line at registration: "cpu 4 (4 usable),
    memory 15.5 GiB (12.0 GiB available), disk ..., GPUs: none (NVML: nvidia-ml-py not installed; ...)"."""
    res = sent.resources
    cards = [gpu for gpu in res.gpus if not gpu.mig]
    if cards:
        models = Counter(gpu.name for gpu in cards)
        gpus = ", ".join(
            f"{count} x {name} ({human_size(next(g for g in cards if g.name == name).memory_total)})"
            for name, count in models.items()
        )
    else:
        why = dict.fromkeys(reason.removeprefix("no GPUs via ").removeprefix("no GPUs: ") for reason in gpu_reasons)
        gpus = f"none ({'; '.join(why) or 'none found'})"
    parts = [
        f"cpu {res.cpu_total:g} ({res.cpu_available:g} usable)",
        f"memory {human_size(res.memory_total)} ({human_size(res.memory_available)} available)",
        f"disk {human_size(res.disk_total)} ({human_size(res.disk_free)} free)",
        *(f"{name} {amount:g}" for name, amount in sorted(sent.custom_resources.items())),
        f"slots {sent.max_concurrent_executions}",
        f"GPUs: {gpus}",
    ]
    return ", ".join(parts)


class Publisher:
    def __init__(self, config: WorkerConfig, executions: Executions, call: Callable[..., Awaitable[Any]]):
        self.config = config
        self.executions = executions
        self.call = call
        self._provider = import_object(config.metrics_provider) if config.metrics_provider else None
        #: The resources sample and metrics the server last accepted from us.
        self.published: tuple[dict | None, dict | None] = (None, None)
        self._state: WorkerState | None = None
        #: Seconds between beats: its own, or what the server paces a large fleet to.
        self.interval = config.heartbeat_interval
        self.sampler = probe.Sampler(config.disk_path, config.gpu_source, config.cgroup_root, gpu_retry=probe.GPU_RETRY)
        #: Why the registration's probe found no GPU (empty when it found some).
        self.gpu_reasons: list[str] = []

    def metrics(self, resources: dict[str, Any]) -> dict[str, float]:
        """Built-in live metrics plus the user's provider's, published for routing policies."""
        metrics = {
            "flux.cpu_percent": float(resources.get("cpu_percent", 0.0)),
            "flux.memory_percent": 100.0 * (1 - resources["memory_available"] / max(resources["memory_total"], 1)),
        }
        if self._provider is not None:
            try:
                metrics.update({str(k): float(v) for k, v in self._provider().items()})
            except Exception:  # noqa: BLE001 - a broken provider must not stop heartbeats
                log.exception("metrics provider %s failed", self.config.metrics_provider)
        return metrics

    def resources_info(self, running: list[str] | None = None) -> WorkerRegistration:
        """The registration payload: resources, packages, runtime, labels, slots.

        GPU detection (the spec's ``Worker._get_gpu_info``) lives in ``flux.worker.probe.detect_gpus``.
        """
        with explained() as self.gpu_reasons:
            info = probe.get_resources_info(
                labels=self.config.labels,
                max_concurrent_executions=self.config.max_concurrent_executions,
                disk_path=self.config.disk_path,
                gpu_source=self.config.gpu_source,
                cgroup_root=self.config.cgroup_root,
            )
        return WorkerRegistration(
            name=self.config.name,
            labels=info["labels"],
            max_concurrent_executions=info["max_concurrent_executions"],
            heartbeat_interval=self.config.heartbeat_interval,
            allocation=self.config.allocation,
            custom_resources=self.config.custom_resources,
            namespaces=list(self.config.namespaces) or None,
            resources=resources_message(info["resources"]),
            packages=[PackageInfo.model_validate(package) for package in info["packages"]],
            runtime=RuntimeInfo.model_validate(info["runtime"]),
            running=running or [],
            metrics=self.metrics(info["resources"]),
        )

    async def registration(self) -> WorkerRegistration:
        # package scan, NVML: off the loop
        return await asyncio.to_thread(self.resources_info, self.executions.ids())

    def registered(self, sent: WorkerRegistration, reply: RegistrationReply) -> None:
        log.info("worker %s offers %s", self.config.name, offered(sent, self.gpu_reasons))
        self.published = (sent.resources.model_dump(), sent.metrics)
        self.executions.abandon(reply.abandon)
        self._paced(reply.heartbeat_interval)

    async def beat(self, draining: bool = False, sample: bool = True) -> None:
        beat = Heartbeat(running=self.executions.ids(), draining=draining)
        resources = metrics = None  # the sample and metrics this beat publishes: those that moved
        if sample:
            try:
                # /proc and /sys alone are read here (~0.3 ms); a GPU driver, off the loop
                sampler = self.sampler
                current = await asyncio.to_thread(sampler.sample) if sampler.reads_devices() else sampler.sample()
                measured = self.metrics(current)
                self.executions.devices_failed(
                    {g["uuid"]: g["unhealthy"] for g in current["gpus"] if g.get("unhealthy")}
                )
                if resources_changed(self.published[0], current):
                    beat.resources, resources = resources_message(current), current
                if metrics_changed(self.published[1], measured):
                    beat.metrics = metrics = measured
            except Exception:  # noqa: BLE001 - a failed sample must not stop the heartbeat itself
                log.exception("resource sample failed; heartbeat sent without it")
        reply = await self.call(f"/workers/{self.config.name}/heartbeat", beat, reply=HeartbeatReply)
        self.published = (
            self.published[0] if resources is None else resources,
            self.published[1] if metrics is None else metrics,
        )
        self.executions.cancel(reply.cancel)
        self.executions.abandon(reply.abandon)
        self.executions.preempt(reply.preempt)
        self.executions.withdraw(reply.withdrawn)
        self._paced(reply.heartbeat_interval)
        if reply.state != self._state:
            self._state = reply.state
            log.info("worker %s is %s", self.config.name, self._state)

    def _paced(self, interval: float | None) -> None:
        """Beat at the server's interval (an older server sends none: keep our own)."""
        paced = interval or self.config.heartbeat_interval
        if paced != self.interval:
            log.info("worker %s heartbeats every %g s (the server paces its fleet)", self.config.name, paced)
            self.interval = paced

    async def run(self, draining: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.beat(draining=draining.is_set())
