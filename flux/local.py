"""Run a server and workers as local child processes: used by ``flux demo``, the
integration tests and the benchmarks, so all three exercise the real processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from flux.domain.workers import WorkerState


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _flux(*args: str) -> list[str]:
    return [sys.executable, "-m", "flux.cli", *args]


class LocalCluster:
    def __init__(
        self,
        home: Path,
        database_url: str | None = None,
        eviction_grace_period: float = 30.0,
        log_dir: Path | None = None,
        server_args: tuple[str, ...] = (),
    ):
        self.home = Path(home)
        self.database_url = database_url
        self.eviction_grace_period = eviction_grace_period
        self.server_args = tuple(server_args)
        self.log_dir = Path(log_dir or self.home / "logs")
        self.port = free_port()
        self.server_url = f"http://127.0.0.1:{self.port}"
        self.server: subprocess.Popen | None = None
        self.workers: dict[str, subprocess.Popen] = {}

    def _popen(self, args: list[str], log_name: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{log_name}.log", "ab")
        env = {**os.environ, "FLUX_HOME": str(self.home), "PYTHONUNBUFFERED": "1", **(env or {})}
        try:
            return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        finally:
            log.close()

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_server(self, timeout: float = 30.0, extra_args: tuple[str, ...] = ()) -> None:
        args = [
            "start",
            "server",
            "--port",
            str(self.port),
            "--eviction-grace-period",
            str(self.eviction_grace_period),
            *self.server_args,
            *extra_args,
        ]
        if self.database_url:
            args += ["--database-url", self.database_url]
        self.server = self._popen(_flux(*args), "server")
        self._wait_until(
            lambda: httpx.get(f"{self.server_url}/health", timeout=1).status_code == 200, timeout, "server"
        )

    def start_worker(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        max_concurrent_executions: int = 4,
        heartbeat_interval: float = 0.5,
        runner: str = "subprocess",
        extra_args: tuple[str, ...] = (),
        wait: bool = True,
        timeout: float = 30.0,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen:
        """``env``: variables added to this worker's environment (e.g. a PYTHONPATH
        with packages only it has)."""
        args = [
            "start",
            "worker",
            name,
            "--server-url",
            self.server_url,
            "--max-concurrent-executions",
            str(max_concurrent_executions),
            "--heartbeat-interval",
            str(heartbeat_interval),
            "--runner",
            runner,
            "--gpu-source",
            "none",
        ]
        for key, value in (labels or {}).items():
            args += ["--label", f"{key}={value}"]
        process = self._popen(_flux(*args, *extra_args), f"worker-{name}", env)
        self.workers[name] = process
        if wait:
            self.wait_for_worker(name, timeout)
        return process

    def wait_for_worker(self, name: str, timeout: float = 30.0) -> None:
        token = os.environ.get("FLUX_API_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else None

        def online() -> bool:
            response = httpx.get(f"{self.server_url}/workers/{name}", timeout=1, headers=headers)
            return response.status_code == 200 and response.json()["state"] == WorkerState.ONLINE

        self._wait_until(online, timeout, f"worker {name}")

    def _wait_until(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if condition():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"{what} not ready after {timeout}s; log:\n{self.log(what.replace(' ', '-'))[-3000:]}")

    def kill_worker(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal the worker's process group and wait for it; with SIGKILL, also until the
        processes it forked are gone too (its template and children, each in a session of
        its own, die with it by ``PR_SET_PDEATHSIG``, a moment later)."""
        process = self.workers.pop(name)
        forked = _descendants(process.pid)
        _signal_group(process, sig)
        process.wait(timeout=15)
        if sig == signal.SIGKILL:
            psutil.wait_procs(forked, timeout=15)

    def stop_server(self, sig: int = signal.SIGTERM) -> None:
        if self.server is not None:
            _stop(self.server, sig)
            self.server = None

    def stop_worker(self, name: str, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Signal a worker (it drains on SIGTERM/SIGINT) and wait for it; returns its exit status."""
        process = self.workers.pop(name)
        process.send_signal(sig)
        try:
            return process.wait(timeout=timeout)
        finally:
            _stop(process, signal.SIGKILL)

    def close(self) -> None:
        for process in self.workers.values():
            _stop(process, signal.SIGTERM, grace=0.5, again=True)
        self.workers.clear()
        self.stop_server()

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    """Signal the process and everything it started (warm children included)."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def _stop(process: subprocess.Popen, sig: int, grace: float = 10.0, again: bool = False) -> None:
    """Signal, wait ``grace``; with ``again``, a second signal (a worker then stops at
    once instead of draining) and a few more seconds; then SIGKILL what is left."""
    for attempt in range(2 if again else 1):
        if process.poll() is not None:
            break
        process.send_signal(sig)
        try:
            process.wait(timeout=grace if attempt == 0 else 5.0)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(process, signal.SIGKILL)
    process.wait(timeout=5)
