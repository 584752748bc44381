"""``local``: ``flux start worker`` processes on the server's host (a workstation, one
big machine, the tests). Each worker gets the template's labels and custom resources,
``flux.pool=NAME`` and its slots; its probed cpu, memory and GPUs are the host's. The
registration token travels in its environment, never its argv. Each is forked from the
warm launcher (``launcher``), which the first pass that sees a local pool starts, or
started from scratch where there is none. Stopping sends SIGTERM (a worker then
drains); a process another replica started is signalled by its id."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from flux.server.autoscale.providers.base import (
    Change,
    Context,
    Provider,
    ProviderError,
    custom_resources,
    worker_labels,
)
from flux.server.autoscale.providers.launcher import Launcher, LauncherGone
from flux.server.autoscale.schemas import LocalOptions

#: Seconds stopped workers have to drain when the server stops, before they are killed.
CLOSE_GRACE = 10.0


class LocalProvider(Provider):
    def __init__(self, context: Context):
        super().__init__(context)
        #: Workers started here: a process of ours (from scratch), or a pid the launcher forked.
        self.processes: dict[str, subprocess.Popen | int] = {}
        self.env = {**os.environ, "FLUX_BOOTSTRAP_TOKEN": context.bootstrap_token, "PYTHONUNBUFFERED": "1"}
        self.env.pop("FLUX_API_TOKEN", None)
        self.launcher = Launcher(self.env, Path(context.home) / "pools" / "launcher.log")
        self._warming: asyncio.Task | None = None

    def prepare(self) -> None:
        if self._warming is None:
            self._warming = asyncio.create_task(self.launcher.warm())

    def argv(self, change: Change, name: str) -> list[str]:
        """``flux`` arguments that start worker ``name`` of the change's pool."""
        options = LocalOptions.model_validate(change.options)
        args = [
            "start",
            "worker",
            name,
            "--server-url",
            options.server_url or self.context.server_url,
            "--max-concurrent-executions",
            str(change.slots),
            "--gpu-source",
            "none" if not change.gpus else "auto",
        ]
        for key, value in worker_labels(change).items():
            args += ["--label", f"{key}={value}"]
        for key, amount in custom_resources(change).items():
            args += ["--resource", f"{key}={amount:g}"]
        return [*args, *options.worker_args]

    async def apply(self, change: Change) -> dict[str, str]:
        self._reap()
        for stop in change.stop:
            self._signal(stop.name, stop.handle)
        logs = Path(self.context.home) / "pools" / change.pool
        logs.mkdir(parents=True, exist_ok=True)
        started = {}
        for name in change.start:
            argv, log = self.argv(change, name), logs / f"{name}.log"
            try:
                self.processes[name] = pid = await self.launcher.spawn(argv, log)
            except LauncherGone:
                process = self._start(argv, log)
                self.processes[name], pid = process, process.pid
            started[name] = str(pid)
        return started

    def _start(self, argv: list[str], log_path: Path) -> subprocess.Popen:
        """A worker from scratch: a fresh interpreter."""
        with open(log_path, "ab") as log:
            try:
                return subprocess.Popen(
                    [sys.executable, "-m", "flux.cli", *argv],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ProviderError(f"could not start a worker process: {exc}") from None

    def _signal(self, name: str, handle: str | None, signum: int = signal.SIGTERM) -> None:
        process = self.processes.get(name)
        pid = process.pid if isinstance(process, subprocess.Popen) else process
        if pid is None and handle and handle.isdigit():
            pid = int(handle)
        if pid is not None:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass  # already gone

    def _reap(self) -> None:
        for name, process in list(self.processes.items()):
            if not _alive(process):
                del self.processes[name]

    async def close(self) -> None:
        """Workers started here end with the server (each drains on SIGTERM)."""
        await self.launcher.close()
        for name in self.processes:
            self._signal(name, None)
        deadline = time.monotonic() + CLOSE_GRACE
        while any(_alive(p) for p in self.processes.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        for process in self.processes.values():
            if _alive(process):
                pid = process.pid if isinstance(process, subprocess.Popen) else process
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
        self.processes.clear()


def _alive(process: subprocess.Popen | int) -> bool:
    """Whether it still runs (the launcher's workers are reaped by the kernel: a gone one has no pid)."""
    if isinstance(process, subprocess.Popen):
        return process.poll() is None
    try:
        os.kill(process, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
