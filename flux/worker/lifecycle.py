"""The worker process: start, register, run its loops, and stop cleanly.

One asyncio loop drives everything: the heartbeat (``heartbeat``), the claim loop
(``claims``), one task per running execution (``running``), all through one session
with the server (``session``); a stop signal hands over to ``drain``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from flux import tracing
from flux.logformat import bind_process
from flux.protocol.registration import WorkerRegistration
from flux.worker.bundles import BundleCache, cache_root
from flux.worker.claims import claim_loop
from flux.worker.config import WorkerConfig, build_runner
from flux.worker.drain import StopSignals, drain
from flux.worker.gangs import advertise_address
from flux.worker.heartbeat import Publisher
from flux.worker.identity import WorkerIdentity
from flux.worker.runners import Runner
from flux.worker.runners.template import ChildTemplate
from flux.worker.running import Executions
from flux.worker.services import redact_worker_logs
from flux.worker.session import Abandoned, Body, Reply, ServerSession

log = logging.getLogger("flux.worker")


class Worker:
    def __init__(self, config: WorkerConfig, runner: Runner | None = None, template: ChildTemplate | None = None):
        """``template``: forked at start (``ChildTemplate.fork``) to fork the children from."""
        self.config = config
        self.runner = runner or build_runner(config, template)
        self.identity = WorkerIdentity(config.home, config.name) if config.home else None
        self.session = ServerSession(config, self.identity)
        self.bundles = BundleCache(
            cache_root(config.bundle_cache_dir, config.home, config.name), config.bundle_cache_size, self.fetch
        )
        self.executions = Executions(
            self.runner,
            self.call,
            log_buffer_lines=config.log_buffer_lines,
            max_log_bytes=config.max_log_bytes,
            capture_output=config.capture_output,
            bundles=self.bundles,
            advertise=self.advertise_address,
        )
        self.publisher = Publisher(config, self.executions, self.call)
        self.signals = StopSignals()

    @property
    def running(self) -> dict:
        return self.executions.running

    def _get_resources_info(self) -> WorkerRegistration:
        """The registration payload (the spec's ``flux/worker.py::_get_resources_info``)."""
        return self.publisher.resources_info()

    async def advertise_address(self) -> str:
        """Where a gang member's peers reach this worker: ``--advertise-address``, else this
        host's address toward the server, found once (off the loop: it may resolve a name)."""
        if self.config.advertise_address is None:
            found = await asyncio.to_thread(advertise_address, self.config.server_url)
            log.info("gang members on this worker are reached at %s (--advertise-address)", found)
            self.config.advertise_address = found
        return self.config.advertise_address

    async def call(self, path: str, json: Body, timeout: float | None = None, reply: type[Reply] | None = None) -> Any:
        """A call to the server (``ServerSession.call``); its reply decoded into ``reply`` when given."""
        return await self.session.call(path, json, self.register_worker, timeout, reply=reply)

    async def fetch(self, path: str) -> bytes:
        """A GET of bytes (a bundle), as resilient as ``call``."""
        return await self.session.call(path, None, self.register_worker, timeout=120.0, method="GET")

    async def register_worker(self, stale_token: str | None = None) -> None:
        registered = await self.session.register_worker(self.publisher.registration, stale_token)
        if registered is not None:
            self.publisher.registered(*registered)

    async def run(self) -> None:
        bind_process(worker=self.config.name)  # every line this process logs names its worker
        redact_worker_logs()  # secret values an attempt holds never show in the worker's lines
        tracing.setup("flux-worker")  # a no-op unless tracing is configured (docs/tracing.md)
        if self.identity is not None:
            self.identity.claim()  # NameTaken if this name already runs on this host
            self.session.token = self.identity.load_token()
        self.session.open()
        self.signals.install()
        # Until registered, a stop signal means stop: nothing runs yet.
        stop_waiting = asyncio.create_task(self._abandon_on_signal())
        loops: list[asyncio.Task] = []
        try:
            await self.register_worker()
            # Then warm the pool (a child forked, the template importing what children
            # run): the worker can take work without it, so it need not wait for it.
            await self.runner.start()
            loops = [
                asyncio.create_task(self.publisher.run(self.signals.draining)),
                asyncio.create_task(claim_loop(self.config, self.executions, self.call)),
            ]
            stop = asyncio.create_task(self.signals.draining.wait())
            done, _ = await asyncio.wait([*loops, stop], return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            for task in done:
                if task is not stop:
                    task.result()  # a loop that died re-raises here
        except Abandoned:
            log.info("stopped while the server was unreachable")
        finally:
            stop_waiting.cancel()
            await self._stop(loops)

    async def _abandon_on_signal(self) -> None:
        """A stop signal while the server cannot be reached ends every wait for it."""
        while True:
            await self.signals.draining.wait()
            if not self.session.reachable or self.signals.now.is_set():
                self.session.abandon.set()
                return
            await asyncio.sleep(0.1)

    async def _stop(self, loops: list[asyncio.Task]) -> None:
        self.signals.draining.set()
        for task in loops[1:]:  # the claim loop: stop claiming at once (the heartbeat goes on)
            task.cancel()
        try:
            await drain(
                self.config.name, self.config.drain_timeout, self.session, self.executions, self.publisher, self.signals
            )
        finally:
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.runner.close()
            await self.session.close()
            if self.identity is not None:
                self.identity.release()
            tracing.flush()
