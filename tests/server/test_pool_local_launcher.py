"""The ``local`` provider's warm launcher (docs/autoscaling.md#providers): a real server,
real worker processes, forked from the launcher, or started from scratch without it."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from flux.client import FluxClient
from flux.server.autoscale.providers.base import Change, Context
from flux.server.autoscale.providers.local import LocalProvider
from flux.server.settings import ServerSettings

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")]


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def registered(client: FluxClient, names: set[str], timeout: float = 60.0) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        online = {w["name"]: w for w in await asyncio.to_thread(client.list_workers) if w["state"] == "ONLINE"}
        if names <= online.keys():
            return online
        await asyncio.sleep(0.2)
    raise AssertionError(f"{names - online.keys()} never registered")


def test_workers_are_forked_from_the_launcher_and_started_from_scratch_without_it(cluster, client, tmp_path):
    token = ServerSettings(home=cluster.home).bootstrap_token_path.read_text().strip()
    provider = LocalProvider(Context(cluster.server_url, str(tmp_path), token))
    template = {
        "pool": "quick",
        "provider": "local",
        "labels": {"tier": "a"},
        "resources": {"accel": 2},
        "gpus": 0,
        "slots": 2,
        "options": {"worker_args": ["--heartbeat-interval", "0.5", "--warm-children", "0"]},
    }

    async def scenario() -> None:
        provider.prepare()  # what the first pass that sees a local pool does
        forked = await provider.apply(Change(**template, start=("quick-forked",), size=1))
        assert provider.launcher.process is not None
        assert parent_of(int(forked["quick-forked"])) == provider.launcher.process.pid
        provider.launcher.failed = True  # as where it cannot be (not Linux) or once it failed
        fresh = await provider.apply(Change(**template, start=("quick-fresh",), size=2))
        assert parent_of(int(fresh["quick-fresh"])) == os.getpid()
        online = await registered(client, {"quick-forked", "quick-fresh"})
        # ps shows the forked worker's own command line, its name in it, not "python -m flux.cli.launcher"
        shown = Path(f"/proc/{forked['quick-forked']}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        assert shown.startswith("flux start worker quick-forked ") and "launcher" not in shown, shown
        for name in ("quick-forked", "quick-fresh"):  # the same worker either way
            assert online[name]["labels"] == {"tier": "a", "flux.pool": "quick"}
            assert online[name]["max_concurrent_executions"] == 2
        started_here = provider.processes["quick-fresh"]  # a Popen: its exit status is ours to read
        await provider.close()  # the server stops: its workers drain and exit, the launcher with them
        for pid in (int(forked["quick-forked"]), int(fresh["quick-fresh"])):
            assert (
                not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]
            )
        # both exited cleanly: the worker drained on SIGTERM, the launcher ended on EOF (-9: killed)
        assert started_here.returncode == 0
        assert provider.launcher.process.returncode == 0

    asyncio.run(scenario())
