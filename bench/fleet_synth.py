"""Synthetic workers for B7 (fleet scale): many workers per OS process, real HTTP protocol.

    python -m bench.fleet_synth --server-url http://127.0.0.1:8000 --token-file HOME/bootstrap-token \\
        --names-from 0 --count 400 --stats-file /tmp/fleet-0.json [--duration 60]

Each synthetic worker is what the server sees of a real one: its own
``httpx.AsyncClient`` (at most 2 connections: the claim long poll and the heartbeat),
a registration with a realistic payload (resources, ~120 packages, runtime), a
heartbeat every ``--heartbeat-interval`` seconds on a fixed grid with a random
initial phase (``--samples busy``: each one carries a resources sample whose free
memory moved by 2 GiB, a material change, as a loaded fleet's would), and a claim
long poll. It does not run code: for every execution it
receives it checkpoints WORKFLOW_STARTED, TASK_STARTED, TASK_COMPLETED and
WORKFLOW_COMPLETED in one batch (the shapes ``flux.model.runtime`` emits for a one-task
workflow), then claims again.

What the workers observe is recorded beside the errors: every heartbeat's round
trip, when each job arrived (wall time, to set beside the server's ``scheduled_at``
and ``claimed_at``), how late an empty long poll came back after its ``wait``, and
the process's own event-loop lag (a 100 ms probe), which bounds how much of the
others is this process's fault.

Errors are counted by kind (``<call>:<status>`` or ``<call>:<exception class>``):
401 registers again, 503 sleeps up to Retry-After (full jitter: uniform(0, Retry-After)),
other 5xx and transport errors back off exponentially with full jitter, and other 4xx
answers (a checkpoint fenced with 409, say) are counted and dropped.

On SIGTERM/SIGINT, after ``--duration`` seconds, or when its parent process goes
away, the process writes its stats as JSON to ``--stats-file`` and exits 0.
With ``--wait-go`` it prints ``ready`` once its imports and payloads are done and
starts only when a line arrives on stdin, so the caller can start a whole fleet of
such processes at one instant.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import resource
import signal
import ssl
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

#: Seconds between the probes of the process's own event-loop lag.
LAG_PROBE = 0.1
WORKFLOW_EVENTS = ("WORKFLOW_STARTED", "TASK_STARTED", "TASK_COMPLETED", "WORKFLOW_COMPLETED")


def raise_nofile_limit() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit (thousands of sockets); returns (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def fake_packages(count: int = 120) -> list[dict[str, str]]:
    """What a real worker's package scan sends: ~120 {name, version} pairs."""
    base = [
        "httpx",
        "pydantic",
        "sqlalchemy",
        "fastapi",
        "uvicorn",
        "numpy",
        "pandas",
        "click",
        "rich",
        "psutil",
        "anyio",
        "sniffio",
        "idna",
        "certifi",
        "h11",
        "starlette",
        "typing-extensions",
        "annotated-types",
    ]
    names = base + [f"synthpkg-{i:03d}" for i in range(count - len(base))]
    rng = random.Random(7)
    return [
        {"name": name, "version": f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}"}
        for name in names[:count]
    ]


class Stats:
    def __init__(self) -> None:
        self.errors: Counter[str] = Counter()
        self.error_log: list[tuple[float, str]] = []  # (wall time, kind), the first 2,000
        self.heartbeats: list[tuple[float, float]] = []  # (wall time sent, round trip ms)
        self.registration_ms: list[float] = []
        self.registrations = 0
        self.reregistrations = 0
        self.claims = 0
        self.executions = 0
        self.checkpoint_ms: list[float] = []
        self.states: Counter[str] = Counter()  # heartbeat reply states
        self.received: list[tuple[str, float]] = []  # (execution id, wall time its claim reply arrived)
        self.poll_overrun_ms: list[float] = []  # empty long polls: how long after their wait they returned
        self.loop_lag: list[tuple[float, float]] = []  # (wall time, ms): overshoot of a 100 ms sleep

    def as_dict(self) -> dict[str, Any]:
        return {
            "errors": dict(self.errors),
            "error_log": [[round(t, 3), kind] for t, kind in self.error_log],
            "heartbeats": [[round(t, 3), round(ms, 3)] for t, ms in self.heartbeats],
            "registration_ms": [round(ms, 3) for ms in self.registration_ms],
            "registrations": self.registrations,
            "reregistrations": self.reregistrations,
            "claims": self.claims,
            "executions": self.executions,
            "checkpoint_ms": [round(ms, 3) for ms in self.checkpoint_ms],
            "heartbeat_states": dict(self.states),
            "received": [[eid, round(t, 4)] for eid, t in self.received],
            "poll_overrun_ms": [round(ms, 2) for ms in self.poll_overrun_ms],
            "loop_lag": [[round(t, 3), round(ms, 2)] for t, ms in self.loop_lag],
        }


def count_error(stats: "Stats", kind: str) -> None:
    stats.errors[kind] += 1
    if len(stats.error_log) < 2000:
        stats.error_log.append((time.time(), kind))


class Stop(Exception):
    """The process is stopping: give up the current call."""


class SynthWorker:
    def __init__(self, name: str, fleet: "Fleet"):
        self.name = name
        self.fleet = fleet
        self.token: str | None = None
        self.interval: float = fleet.args.heartbeat_interval  # the server may pace it (docs/fleet.md#heartbeat-pacing)
        self.running: set[str] = set()
        self.http: httpx.AsyncClient | None = None
        self._register_lock = asyncio.Lock()

    # --- requests ------------------------------------------------------------------------

    async def _post(self, kind: str, path: str, body: Any, timeout: float, bootstrap: bool = False) -> dict | None:
        """POST with the worker's retry rules. None when the server refused it for good (4xx)."""
        stats, attempt = self.fleet.stats, 0
        while True:
            if self.fleet.stopping.is_set():
                raise Stop
            token = self.fleet.bootstrap_token if bootstrap else self.token
            try:
                response = await self.http.post(
                    path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
                )
            except httpx.HTTPError as exc:  # transport: connect refused/reset, timeouts, pool exhausted
                if self.fleet.stopping.is_set():
                    raise Stop from None  # our own stop closed the connection: not the server's error
                count_error(stats, f"{kind}:{type(exc).__name__}")
                attempt += 1
                await self._sleep(random.uniform(0, min(10.0, 0.2 * 2**attempt)))
                continue
            status = response.status_code
            if status < 400:
                return response.json()
            count_error(stats, f"{kind}:{status}")
            if status == 401 and not bootstrap:
                await self.register(stale=token)
                continue
            if status == 503:
                try:
                    retry_after = float(response.headers.get("retry-after", "1"))
                except ValueError:
                    retry_after = 1.0
                await self._sleep(random.uniform(0, max(retry_after, 0.05)))
                continue
            if status >= 500:
                attempt += 1
                await self._sleep(random.uniform(0, min(10.0, 0.2 * 2**attempt)))
                continue
            return None

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.fleet.stopping.wait(), seconds)
        if self.fleet.stopping.is_set():
            raise Stop

    async def register(self, stale: str | None = None) -> None:
        async with self._register_lock:
            if stale is not None and self.token != stale:
                return  # another call registered again meanwhile
            if stale is not None:
                self.fleet.stats.reregistrations += 1
            body = {
                **self.fleet.payload,
                "name": self.name,
                "running": sorted(self.running),
                "runtime": {**self.fleet.payload["runtime"], "hostname": self.name},
            }
            t0 = time.perf_counter()
            reply = await self._post("register", "/workers/register", body, timeout=30.0, bootstrap=True)
            if reply is None:
                raise RuntimeError(f"worker {self.name}: registration refused")
            self.fleet.stats.registration_ms.append((time.perf_counter() - t0) * 1000)
            self.fleet.stats.registrations += 1
            self.token = reply["session_token"]
            self._paced(reply)

    def _paced(self, reply: dict) -> None:
        """Beat at the interval the server's reply gives, as a real worker does (none: our own)."""
        self.interval = reply.get("heartbeat_interval") or self.fleet.args.heartbeat_interval

    # --- loops ---------------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        next_beat, beats = time.monotonic() + random.uniform(0, self.interval), 0
        while True:
            await self._sleep(max(0.0, next_beat - time.monotonic()))
            next_beat += self.interval  # the server's pace, as a real worker keeps it
            if next_beat < time.monotonic():  # fell behind (a slow server): do not burst to catch up
                next_beat = time.monotonic() + self.interval
            body: dict[str, Any] = {"running": sorted(self.running)}
            if self.fleet.args.samples == "busy":
                beats += 1
                body["resources"] = self.fleet.busy_sample(beats)
            sent, t0 = time.time(), time.perf_counter()
            reply = await self._post("heartbeat", f"/workers/{self.name}/heartbeat", body, timeout=30.0)
            if reply is not None:
                self.fleet.stats.heartbeats.append((sent, (time.perf_counter() - t0) * 1000))
                self.fleet.stats.states[reply.get("state", "?")] += 1
                self._paced(reply)

    async def claim_loop(self) -> None:
        wait = self.fleet.args.claim_wait
        stats = self.fleet.stats
        while True:
            t0 = time.perf_counter()
            reply = await self._post("claim", f"/workers/{self.name}/claim", {"wait": wait}, timeout=wait + 15)
            arrived, waited = time.time(), time.perf_counter() - t0
            stats.claims += 1
            if reply is None:
                await self._sleep(1.0)
                continue
            jobs = reply.get("executions", [])
            stats.received += [(job["id"], arrived) for job in jobs]
            if not jobs and waited >= wait:  # an empty poll that ran its course: how late it came back
                stats.poll_overrun_ms.append((waited - wait) * 1000)
            if jobs:
                # The server hands out at most the free slots; the batch is done before the next claim.
                await asyncio.gather(*(self.execute(job) for job in jobs))

    async def execute(self, job: dict) -> None:
        self.running.add(job["id"])
        try:
            now, workflow = time.time(), job["workflow_name"]
            value = job.get("input")
            events = [
                {
                    "type": "WORKFLOW_STARTED",
                    "name": workflow,
                    "task_id": None,
                    "value": {"attempt": job["attempt"]},
                    "time": now,
                },
                {"type": "TASK_STARTED", "name": "noop", "task_id": "noop:1", "value": {"attempt": 1}, "time": now},
                {"type": "TASK_COMPLETED", "name": "noop", "task_id": "noop:1", "value": value, "time": now},
                {"type": "WORKFLOW_COMPLETED", "name": workflow, "task_id": None, "value": value, "time": now},
            ]
            t0 = time.perf_counter()
            reply = await self._post(
                "checkpoint",
                f"/executions/{job['id']}/checkpoint",
                {"attempt": job["attempt"], "batch": 1, "events": events},
                timeout=30.0,
            )
            if reply is not None:
                self.fleet.stats.checkpoint_ms.append((time.perf_counter() - t0) * 1000)
                self.fleet.stats.executions += 1
        finally:
            self.running.discard(job["id"])

    async def run(self) -> None:
        # keepalive_expiry below the server's keep-alive timeout (75 s), like a real worker (30 s).
        limits = httpx.Limits(
            max_connections=2, max_keepalive_connections=2, keepalive_expiry=self.fleet.args.keepalive_expiry
        )
        # One TLS context for the process: building one per client (httpx's default) costs
        # ~20 ms of CPU each, which alone delayed a 1,000-worker fleet's start by many seconds.
        async with httpx.AsyncClient(
            base_url=self.fleet.args.server_url,
            limits=limits,
            verify=self.fleet.tls,
            timeout=httpx.Timeout(30.0, pool=60.0),
        ) as self.http:
            try:
                await self.register()
                await asyncio.gather(self.heartbeat_loop(), self.claim_loop())
            except Stop:
                pass


class Fleet:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.stats = Stats()
        self.stopping = asyncio.Event()
        token = args.token or Path(args.token_file).read_text().strip()
        self.bootstrap_token = token
        self.payload = {
            "labels": {"fleet": "synthetic", "zone": f"z{args.names_from % 3}"},
            "max_concurrent_executions": args.max_concurrent_executions,
            "heartbeat_interval": args.heartbeat_interval,
            "allocation": "sample",
            "custom_resources": {},
            "resources": {
                "cpu_total": 8,
                "cpu_available": 8,
                "cpu_percent": 3.0,
                "memory_total": 32 * 2**30,
                "memory_available": 24 * 2**30,
                "disk_total": 500 * 2**30,
                "disk_free": 300 * 2**30,
                "gpus": [],
            },
            "packages": fake_packages(args.packages),
            "runtime": {
                "python_version": platform.python_version(),
                "os_name": platform.system(),
                "os_version": platform.release(),
                "hostname": "synthetic",
                "cpu_arch": platform.machine(),
            },
            "metrics": {},
        }
        self.tls = ssl.create_default_context()
        self.names = [f"{args.prefix}{i:05d}" for i in range(args.names_from, args.names_from + args.count)]

    def busy_sample(self, beat: int) -> dict[str, Any]:
        """The registration's resources with free memory 2 GiB lower on every other beat
        of a worker: each beat moves it by more than ``max(1 % of 32 GiB, 64 MiB)``, a
        material change."""
        free = self.payload["resources"]["memory_available"] - (2 * 2**30 if beat % 2 else 0)
        return {**self.payload["resources"], "memory_available": free}

    async def watch_lag(self) -> None:
        """This process's event-loop lag: how late a 100 ms sleep wakes (its share of every latency it records)."""
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(LAG_PROBE)
            self.stats.loop_lag.append((time.time(), max(0.0, time.perf_counter() - t0 - LAG_PROBE) * 1000))

    async def run(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        if self.args.wait_go:
            print("ready", flush=True)
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:  # the caller went away before the start
                return {"aborted": "stdin closed before go"}
        started, cpu0 = time.time(), time.process_time()
        parent = os.getppid()
        tasks = [asyncio.create_task(SynthWorker(name, self).run()) for name in self.names]
        lag = asyncio.create_task(self.watch_lag())
        deadline = time.monotonic() + self.args.duration if self.args.duration else None
        while not self.stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), 1.0)
            if os.getppid() != parent or (deadline and time.monotonic() >= deadline):
                self.stopping.set()
        lag.cancel()
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        crashed = Counter(
            type(r).__name__
            for r in results
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)
        )
        return {
            "names_from": self.args.names_from,
            "count": self.args.count,
            "started_at": started,
            "stopped_at": time.time(),
            "cpu_s": round(time.process_time() - cpu0, 3),
            "crashed_workers": dict(crashed),
            **self.stats.as_dict(),
        }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet_synth", description=__doc__.split("\n")[0])
    parser.add_argument("--server-url", required=True)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--token", help="bootstrap token")
    group.add_argument("--token-file", help="file holding the bootstrap token (HOME/bootstrap-token)")
    parser.add_argument("--names-from", type=int, default=0, help="index of this process's first worker")
    parser.add_argument("--count", type=int, default=100, help="workers in this process")
    parser.add_argument("--prefix", default="synth-", help="worker name prefix [synth-]")
    parser.add_argument("--max-concurrent-executions", type=int, default=4)
    parser.add_argument("--heartbeat-interval", type=float, default=5.0)
    parser.add_argument("--claim-wait", type=float, default=20.0, help="long-poll wait sent with each claim [20]")
    parser.add_argument(
        "--keepalive-expiry",
        type=float,
        default=30.0,
        help="seconds an idle connection is kept: 30 like a real worker, under the server's 75 s keep-alive [30]",
    )
    parser.add_argument(
        "--samples",
        choices=("quiet", "busy"),
        default="quiet",
        help="quiet: heartbeats carry no sample; busy: a materially changed one on every beat [quiet]",
    )
    parser.add_argument("--packages", type=int, default=120, help="fake packages in the registration [120]")
    parser.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0: until a signal)")
    parser.add_argument("--stats-file", type=Path, required=True)
    parser.add_argument("--wait-go", action="store_true", help="print 'ready', start on a line from stdin")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    raise_nofile_limit()
    fleet = Fleet(args)
    stats = asyncio.run(fleet.run())
    tmp = args.stats_file.with_name(args.stats_file.name + ".tmp")
    tmp.write_text(json.dumps(stats))
    tmp.replace(args.stats_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
