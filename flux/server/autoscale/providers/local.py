"""``local``: ``flux start worker`` processes on the server's host (a workstation, one
big machine, the tests). Each worker gets the template's labels and custom resources,
``flux.pool=NAME`` and its slots; its probed cpu, memory and GPUs are the host's. The
registration token travels in its environment, never its argv. Stopping sends SIGTERM
(a worker then drains); a process another replica started is signalled by its id."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from flux.server.autoscale.providers.base import Change, Context, Provider, ProviderError, custom_resources, worker_labels
from flux.server.autoscale.schemas import LocalOptions


class LocalProvider(Provider):
    def __init__(self, context: Context):
        super().__init__(context)
        self.processes: dict[str, subprocess.Popen] = {}

    def argv(self, change: Change, name: str) -> list[str]:
        options = LocalOptions.model_validate(change.options)
        args = [sys.executable, "-m", "flux.cli", "start", "worker", name,
                "--server-url", options.server_url or self.context.server_url,
                "--max-concurrent-executions", str(change.slots), "--gpu-source", "none" if not change.gpus else "auto"]
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
        env = {**os.environ, "FLUX_BOOTSTRAP_TOKEN": self.context.bootstrap_token, "PYTHONUNBUFFERED": "1"}
        env.pop("FLUX_API_TOKEN", None)
        started = {}
        for name in change.start:
            with open(logs / f"{name}.log", "ab") as log:
                try:
                    process = subprocess.Popen(self.argv(change, name), stdout=log, stderr=subprocess.STDOUT, env=env,
                                               stdin=subprocess.DEVNULL, start_new_session=True)
                except OSError as exc:
                    raise ProviderError(f"could not start a worker process: {exc}") from None
            self.processes[name] = process
            started[name] = str(process.pid)
        return started

    def _signal(self, name: str, handle: str | None) -> None:
        process = self.processes.get(name)
        try:
            if process is not None:
                process.send_signal(signal.SIGTERM)
            elif handle and handle.isdigit():
                os.kill(int(handle), signal.SIGTERM)
        except ProcessLookupError:
            pass  # already gone

    def _reap(self) -> None:
        for name, process in list(self.processes.items()):
            if process.poll() is not None:
                del self.processes[name]

    async def close(self) -> None:
        """Workers started here end with the server (each drains on SIGTERM)."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        self.processes.clear()
