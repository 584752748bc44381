"""What a worker publishes: its registration payload and its heartbeats.

A heartbeat is liveness, plus a fresh resource sample only when it moved materially
(``flux.domain.samples``): hot-attached GPUs and freed memory are seen within one
beat, and an idle worker's beat is a few bytes that cost the server no database
write. The reply names executions to cancel (a user asked) and to abandon (their
attempt went elsewhere: fenced).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from flux.worker import probe
from flux.domain.samples import metrics_changed, resources_changed
from flux.objects import import_object
from flux.worker.config import WorkerConfig
from flux.worker.running import Executions

log = logging.getLogger("flux.worker")


class Publisher:
    def __init__(self, config: WorkerConfig, executions: Executions, call: Callable[..., Awaitable[Any]]):
        self.config = config
        self.executions = executions
        self.call = call
        self._provider = import_object(config.metrics_provider) if config.metrics_provider else None
        #: The resources sample and metrics the server last accepted from us.
        self.published: tuple[dict | None, dict | None] = (None, None)
        self._state: str | None = None

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

    def resources_info(self) -> dict[str, Any]:
        """The registration payload: resources, packages, runtime, labels, slots.

        GPU detection (the spec's ``Worker._get_gpu_info``) lives in ``flux.worker.probe.detect_gpus``.
        """
        info = probe.get_resources_info(
            labels=self.config.labels,
            max_concurrent_executions=self.config.max_concurrent_executions,
            disk_path=self.config.disk_path,
            gpu_source=self.config.gpu_source,
            cgroup_root=self.config.cgroup_root,
        )
        return {
            "name": self.config.name,
            "heartbeat_interval": self.config.heartbeat_interval,
            "allocation": self.config.allocation,
            "custom_resources": self.config.custom_resources,
            "metrics": self.metrics(info["resources"]),
            **info,
        }

    async def registration(self) -> dict[str, Any]:
        payload = await asyncio.to_thread(self.resources_info)  # package scan, NVML: off the loop
        payload["running"] = self.executions.ids()
        return payload

    def registered(self, reply: dict) -> None:
        sent = reply["sent"]
        self.published = (sent["resources"], sent["metrics"])
        self.executions.abandon(reply["abandon"])

    async def beat(self, draining: bool = False, sample: bool = True) -> None:
        beat: dict[str, Any] = {"running": self.executions.ids()}
        if draining:
            beat["draining"] = True
        if sample:
            try:
                resources = await asyncio.to_thread(
                    probe.sample_resources, self.config.disk_path, self.config.gpu_source, cgroup_root=self.config.cgroup_root
                )
                metrics = self.metrics(resources)
                if resources_changed(self.published[0], resources):
                    beat["resources"] = resources
                if metrics_changed(self.published[1], metrics):
                    beat["metrics"] = metrics
            except Exception:  # noqa: BLE001 - a failed sample must not stop the heartbeat itself
                log.exception("resource sample failed; heartbeat sent without it")
        reply = await self.call(f"/workers/{self.config.name}/heartbeat", beat)
        self.published = (beat.get("resources", self.published[0]), beat.get("metrics", self.published[1]))
        self.executions.cancel(reply["cancel"])
        self.executions.abandon(reply.get("abandon", []))
        if reply["state"] != self._state:
            self._state = reply["state"]
            log.info("worker %s is %s", self.config.name, self._state)

    async def run(self, draining: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            await self.beat(draining=draining.is_set())
