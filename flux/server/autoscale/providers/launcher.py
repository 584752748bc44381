"""The ``local`` provider's end of the warm launcher (``python -m flux.cli.launcher``):
started when a local pool first exists, it forks each worker in milliseconds instead
of the seconds a fresh interpreter takes on a busy host. Linux only (a fork of an
imported process); anywhere else, or once it has failed, the provider starts workers
from scratch and says so in the log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger("flux.server.autoscale")

#: Seconds the launcher may take to import (a loaded host), and to answer one fork.
READY_TIMEOUT, SPAWN_TIMEOUT = 60.0, 10.0
#: Its replies are one short line; its requests carry an argv of at most a few KiB.
LINE_LIMIT = 1 << 16


class LauncherGone(Exception):
    """The launcher is not there to fork from: start the worker from scratch."""


class Launcher:
    def __init__(self, env: dict[str, str], log_path: Path):
        self.env = env
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None
        self.failed = not sys.platform.startswith("linux")
        self._lock = asyncio.Lock()

    async def warm(self) -> None:
        """Start it now, so that the first worker a pool asks for is forked from it."""
        with contextlib.suppress(LauncherGone):
            async with self._lock:
                await self._ready()

    async def spawn(self, argv: list[str], log_file: Path) -> int:
        """The pid of a new worker process running ``flux ARGV``, its output in ``log_file``."""
        async with self._lock:
            process = await self._ready()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(json.dumps({"argv": argv, "log": str(log_file)}).encode() + b"\n")
                await process.stdin.drain()
                reply = json.loads(await asyncio.wait_for(process.stdout.readline(), SPAWN_TIMEOUT) or b"null")
            except (OSError, TimeoutError, ValueError) as exc:
                self._give_up(f"the worker launcher did not answer ({type(exc).__name__})")
            if not isinstance(reply, dict) or "pid" not in reply:
                error = reply.get("error") if isinstance(reply, dict) else "it exited"
                self._give_up(f"the worker launcher failed: {error}")
            return int(reply["pid"])

    async def _ready(self) -> asyncio.subprocess.Process:
        if self.failed:
            raise LauncherGone()
        if self.process is not None and self.process.returncode is None:
            return self.process
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        errors = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "flux.cli.launcher",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=errors,
                env=self.env,
                start_new_session=True,
                limit=LINE_LIMIT,
            )
        finally:
            os.close(errors)
        try:
            assert self.process.stdout is not None
            ready = await asyncio.wait_for(self.process.stdout.readline(), READY_TIMEOUT)
        except TimeoutError:
            ready = b""
        if not ready.startswith(b'{"ready"'):
            self._give_up(f"the worker launcher did not start (see {self.log_path})")
        return self.process

    def _give_up(self, why: str) -> None:
        self.failed = True
        log.warning("%s; pool workers are started from scratch from now on", why)
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
        raise LauncherGone(why)

    async def close(self) -> None:
        """EOF: it exits (the workers it forked are stopped by the provider)."""
        if self.process is None or self.process.returncode is not None:
            return
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 5.0)
        except TimeoutError:
            self.process.kill()
