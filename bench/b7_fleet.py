"""B7 fleet scale (tracker issue 22): one server, N synthetic workers speaking the real protocol.

    python -m bench.b7_fleet --quick                       # N=10,100 on SQLite, short phases (< 90 s)
    python -m bench.b7_fleet --workers 1000 --database postgres --duration 30
    python -m bench.b7_fleet --workers 3000 --database postgres --processes 2
    python -m bench --only B7 [--quick] [--b7-workers ...]  # the same inside the suite's record

For every database and every fleet size N: a fresh server (``python -m flux.cli start
server --port P --home H [--database-url URL] [--processes P]``; on PostgreSQL a scratch
database), N synthetic workers (``bench.fleet_synth``, ~250 per OS process, each with
its own HTTP client), then:

1. ``online_s``: from the start signal to the fleet until ``GET /workers`` shows N ONLINE;
2. ``idle_cpu_pct``: the server's CPU (its process and children) over an idle window;
3. ``heartbeat_ms``: every heartbeat's round trip (idle and load phases), p50/p95/p99;
4. a load phase: a one-task workflow submitted at ``--rate`` runs/s for ``--duration`` s,
   then ``submit_to_claimed_ms``, ``submit_to_completed_ms``, ``runs_per_s``,
   ``server_cpu_pct``, ``lost``, ``submit_errors``;
5. ``evictions`` (workers seen STALE or OFFLINE, re-registrations, and any eviction counter
   in ``/metrics``) and ``errors`` (every failed request of workers and submitters);
6. for N=10 only: ``burst_runs_per_s``, 1,000 runs submitted at once (workers with 50 slots).

Figures are named ``B7.<db>[.pP].<N>.<figure>``. Aims are the issue's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import httpx

from bench.b7_observed import ROUND_TRIP_AIM, observed
from bench.common import REPO, Figure, Skipped, sigterm_as_interrupt, write_workflow
from bench.fleet_synth import raise_nofile_limit
from bench.workflows import SOURCE, TRIVIAL
from flux.domain.workers import DEFAULT_MAX_HEARTBEATS_PER_SECOND, paced_interval

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
DATABASES = ("sqlite", "postgres")
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")
NOT_DONE = ("SCHEDULED", "CLAIMED", "RUNNING", "CANCELLING")


@dataclass
class Options:
    workers: list[int] = field(default_factory=lambda: [10, 100, 1000, 3000])
    databases: list[str] = field(default_factory=lambda: list(DATABASES))
    processes: int = 1
    rate: float = 20.0
    duration: float = 30.0
    quick: bool = False
    pg_url: str = DEFAULT_PG_URL
    per_process: int = 250
    heartbeat_interval: float = 5.0
    idle_s: float = 15.0
    burst: int = 1000
    burst_slots: int = 50
    slots: int = 4
    keep: bool = False
    #: quiet: heartbeats carry no sample; busy: a material change on every beat.
    samples: str = "quiet"
    #: Run the server from this checkout (a baseline to compare with), not this one.
    server_repo: Path | None = None
    #: Run the server under ``bench.sampler``, one report per unit in this folder.
    profile: Path | None = None

    @classmethod
    def make(
        cls,
        *,
        quick: bool = False,
        workers: str | None = None,
        database: str | None = None,
        duration: float | None = None,
        idle: float | None = None,
        burst: int | None = None,
        **kw: Any,
    ) -> "Options":
        opts = cls(quick=quick, **{k: v for k, v in kw.items() if v is not None})
        if quick:
            opts.workers, opts.databases = [10, 100], ["sqlite"]
            opts.duration, opts.idle_s, opts.burst = 8.0, 5.0, 200
        if workers:
            opts.workers = [int(w) for w in workers.split(",") if w.strip()]
        if database:
            opts.databases = list(DATABASES) if database == "both" else [database]
        if duration is not None:
            opts.duration = duration
        if idle is not None:
            opts.idle_s = idle
        if burst is not None:
            opts.burst = burst
        return opts

    def tag(self, db: str, n: int) -> str:
        busy = ".busy" if self.samples == "busy" else ""
        return f"B7.{db}{f'.p{self.processes}' if self.processes > 1 else ''}{busy}.{n}"


# --- processes --------------------------------------------------------------------------

_STARTED: dict[int, subprocess.Popen] = {}  # every process this module started, until stopped


def _popen(args: list[str], log: Path, **kw: Any) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            **kw.pop("env", {}),
        }
        process = subprocess.Popen(
            args,
            stderr=out,
            stdout=kw.pop("stdout", out),
            env=env,
            cwd=kw.pop("cwd", REPO),
            start_new_session=True,
            **kw,
        )
    _STARTED[process.pid] = process
    return process


def _stop(process: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """Signal the process, wait ``grace``, then SIGKILL its process group (its own session)."""
    try:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
    finally:
        _STARTED.pop(process.pid, None)


def stop_all() -> None:
    for process in list(_STARTED.values()):
        _stop(process, grace=3.0)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _error_line(log: str) -> str | None:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^(Error: |Usage: .*|[\w.]*(Error|Exception)\b.*:)", line)]
    return (errors or lines or [None])[-1]


class Server:
    def __init__(
        self,
        home: Path,
        database_url: str | None,
        processes: int,
        repo: Path | None = None,
        profile: Path | None = None,
    ):
        self.home, self.database_url, self.processes = home, database_url, processes
        self.repo, self.profile = repo, profile
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "logs" / "server.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> None:
        args = [sys.executable, "-m", "flux.cli", "start", "server", "--port", str(self.port), "--home", str(self.home)]
        if self.database_url:
            args += ["--database-url", self.database_url]
        if self.processes > 1:
            args += ["--processes", str(self.processes)]
        if self.profile is not None:
            self.profile.mkdir(parents=True, exist_ok=True)
            args[1:1] = ["-m", "bench.sampler", str(self.profile / f"{self.home.name}.txt")]
        env = {"FLUX_HOME": str(self.home)}
        if self.repo is not None:  # its flux first; bench (the sampler) from here
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.repo), str(REPO), os.environ.get("PYTHONPATH")]))
        self.process = _popen(args, self.log_path, env=env, cwd=self.repo or REPO)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                reason = _error_line(self.log()) or f"exit status {self.process.returncode}"
                if self.processes > 1 and "processes" in self.log():
                    raise Skipped(f"the server rejected --processes {self.processes}: {reason}")
                raise Skipped(f"the server did not start: {reason}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        raise Skipped(f"the server did not answer /health within {timeout:.0f} s: {_error_line(self.log())}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def token_file(self) -> Path:
        return self.home / "bootstrap-token"

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process)
            self.process = None


class CpuMeter:
    """CPU seconds (user + system) of a process and its children, or of the PostgreSQL
    backends serving one database (their titles name it; the server's own command
    line names it too, and is not counted)."""

    def __init__(self, pid: int | None = None, postgres_database: str | None = None, children: bool = True):
        self.pid, self.needle, self.children = pid, postgres_database, children

    def sample(self) -> dict[int, float]:
        import psutil

        procs: list[psutil.Process] = []
        if self.pid is not None:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(self.pid)
                procs = [root, *(root.children(recursive=True) if self.children else ())]
        if self.needle:
            for proc in psutil.process_iter(["cmdline", "name"]):
                if (proc.info["name"] or "").startswith("postgres") and self.needle in " ".join(
                    proc.info["cmdline"] or []
                ):
                    procs.append(proc)
        out = {}
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                out[proc.pid] = times.user + times.system
        return out

    @staticmethod
    def used(before: dict[int, float], after: dict[int, float]) -> float:
        """CPU seconds between two samples, process by process: one that started meanwhile
        counts from zero, one that exited meanwhile is not subtracted."""
        return sum(max(0.0, t - before.get(pid, 0.0)) for pid, t in after.items())

    @staticmethod
    def percent(before: dict[int, float], after: dict[int, float], wall: float) -> float:
        return 100.0 * CpuMeter.used(before, after) / max(wall, 1e-9)


class SynthFleet:
    """``bench.fleet_synth`` processes, started together on a 'go' line."""

    def __init__(self, server: Server, work: Path, n: int, opts: Options, slots: int, duration_cap: float):
        self.server, self.work, self.n, self.opts = server, work, n, opts
        self.slots, self.duration_cap = slots, duration_cap
        self.processes: list[tuple[subprocess.Popen, Path]] = []
        self.stats: list[dict] = []

    def start(self, ready_timeout: float = 90.0) -> float:
        """Start every process, wait for all 'ready' lines, send 'go'; return the go instant (monotonic)."""
        count = max(1, math.ceil(self.n / self.opts.per_process))
        per = math.ceil(self.n / count)
        for i, first in enumerate(range(0, self.n, per)):
            stats_file = self.work / f"fleet-{i}.json"
            args = [
                sys.executable,
                "-m",
                "bench.fleet_synth",
                "--server-url",
                self.server.url,
                "--token-file",
                str(self.server.token_file),
                "--names-from",
                str(first),
                "--count",
                str(min(per, self.n - first)),
                "--prefix",
                "synth-",
                "--max-concurrent-executions",
                str(self.slots),
                "--heartbeat-interval",
                str(self.opts.heartbeat_interval),
                "--samples",
                self.opts.samples,
                "--duration",
                str(self.duration_cap),
                "--stats-file",
                str(stats_file),
                "--wait-go",
            ]
            process = _popen(args, self.work / "logs" / f"fleet-{i}.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self.processes.append((process, stats_file))
        selector = selectors.DefaultSelector()
        for process, _ in self.processes:
            selector.register(process.stdout, selectors.EVENT_READ, process)
        waiting, deadline = {p.pid for p, _ in self.processes}, time.monotonic() + ready_timeout
        while waiting and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.5):
                process = key.data
                line = process.stdout.readline()
                if not line:
                    raise RuntimeError(
                        f"fleet process {process.pid} exited before 'ready': {_error_line(self._log(process))}"
                    )
                if line.strip() == b"ready":
                    waiting.discard(process.pid)
                    selector.unregister(process.stdout)
        selector.close()
        if waiting:
            raise RuntimeError(f"{len(waiting)} fleet processes not ready after {ready_timeout:.0f} s")
        go = time.monotonic()
        for process, _ in self.processes:
            process.stdin.write(b"go\n")
            process.stdin.flush()
            process.stdin.close()
            process.stdout.close()
        return go

    def _log(self, process: subprocess.Popen) -> str:
        for i, (p, _) in enumerate(self.processes):
            if p is process:
                path = self.work / "logs" / f"fleet-{i}.log"
                return path.read_text(errors="replace") if path.exists() else ""
        return ""

    def stop(self) -> list[dict]:
        """SIGTERM every process (each writes its stats), wait, collect the stats."""
        for process, _ in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        for process, _ in self.processes:
            _stop(process, grace=30.0)
        self.stats = []
        for process, stats_file in self.processes:
            if stats_file.exists():
                self.stats.append(json.loads(stats_file.read_text()))
            else:
                self.stats.append(
                    {
                        "missing": f"no stats from pid {process.pid} (exit {process.returncode}): "
                        f"{_error_line(self._log(process))}"
                    }
                )
        self.processes = []
        return self.stats


# --- measurements -------------------------------------------------------------------------


class WorkerWatch:
    """How many workers were ever seen STALE or OFFLINE, from ``/metrics``'s
    ``flux_workers{state}`` (what an operator's Prometheus reads; listing a thousand
    workers through ``GET /workers`` on every poll would load the server more than
    the fleet does)."""

    def __init__(self) -> None:
        self.worst = 0
        self.polls = 0
        self.errors: Counter[str] = Counter()

    def record(self, text: str) -> int:
        self.polls += 1
        states = {}
        for line in text.splitlines():
            if line.startswith("flux_workers{"):
                states[line.split('state="', 1)[1].split('"', 1)[0]] = float(line.split()[-1])
        self.worst = max(self.worst, int(states.get("STALE", 0) + states.get("OFFLINE", 0)))
        return int(states.get("ONLINE", 0))

    def poll(self, url: str) -> int:
        try:
            response = httpx.get(f"{url}/metrics", timeout=60)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            self.errors[type(exc).__name__] += 1
            return -1
        return self.record(response.text)

    async def apoll(self, client: httpx.AsyncClient) -> None:
        try:
            response = await client.get("/metrics", timeout=60)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            self.errors[type(exc).__name__] += 1
            return
        self.record(response.text)


def wait_online(url: str, n: int, go: float, timeout: float, watch: WorkerWatch) -> tuple[float, int]:
    """Seconds from ``go`` until N ONLINE (nan on timeout) and the last count seen."""
    interval, online = (0.2 if n <= 300 else 0.5), 0
    while time.monotonic() - go < timeout:
        online = max(watch.poll(url), online)
        if online >= n:
            return time.monotonic() - go, online
        time.sleep(interval)
    return float("nan"), online


async def _submit(client: httpx.AsyncClient, workflow: str, i: int, ids: list[str], errors: Counter[str]) -> None:
    for attempt in range(6):
        try:
            response = await client.post(f"/workflows/{workflow}/run", json={"input": i})
        except httpx.HTTPError as exc:
            errors[type(exc).__name__] += 1
            await asyncio.sleep(random.uniform(0, 0.2 * 2**attempt))
            continue
        if response.status_code == 201:
            ids.append(response.json()["id"])
            return
        errors[str(response.status_code)] += 1
        if response.status_code == 503:
            with contextlib.suppress(ValueError):
                await asyncio.sleep(random.uniform(0, float(response.headers.get("retry-after", "1"))))
            continue
        if response.status_code < 500:
            return
        await asyncio.sleep(random.uniform(0, 0.2 * 2**attempt))


async def _wait_done(client: httpx.AsyncClient, timeout: float) -> bool:
    """Until no execution is SCHEDULED/CLAIMED/RUNNING/CANCELLING (this server is ours alone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = False
        for state in NOT_DONE:
            with contextlib.suppress(httpx.HTTPError):
                response = await client.get("/executions", params={"state": state, "limit": 1})
                if response.status_code != 200 or response.json():
                    busy = True
                    break
        if not busy:
            return True
        await asyncio.sleep(0.25)
    return False


async def _fetch(client: httpx.AsyncClient, ids: list[str]) -> list[dict]:
    gate = asyncio.Semaphore(8)

    async def one(execution_id: str) -> dict | None:
        async with gate:
            for _ in range(3):
                with contextlib.suppress(httpx.HTTPError):
                    response = await client.get(f"/executions/{execution_id}")
                    if response.status_code == 200:
                        return response.json()
            return None

    return [e for e in await asyncio.gather(*(one(i) for i in ids)) if e is not None]


def _client(url: str, connections: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=url,
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        timeout=httpx.Timeout(30.0, pool=300.0),
    )


async def load_phase(url: str, rate: float, duration: float, drain: float, watch: WorkerWatch) -> dict:
    """Submit at a steady rate, wait for the queue to empty, fetch every execution."""
    count = max(1, int(round(rate * duration)))
    ids: list[str] = []
    errors: Counter[str] = Counter()
    async with _client(url, 8) as client, _client(url, 1) as watcher:
        stop_watch = asyncio.Event()

        async def watch_loop() -> None:
            while not stop_watch.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop_watch.wait(), 5.0)
                await watch.apoll(watcher)

        watching = asyncio.create_task(watch_loop())
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        tasks = []
        for i in range(count):
            delay = t0 + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_submit(client, TRIVIAL, i, ids, errors)))
        await asyncio.gather(*tasks)
        submit_s = loop.time() - t0
        drained = await _wait_done(client, drain)
        stop_watch.set()
        await watching
        executions = await _fetch(client, ids)
    return {
        "count": count,
        "ids": ids,
        "errors": errors,
        "executions": executions,
        "drained": drained,
        "submit_s": submit_s,
    }


async def burst_phase(url: str, count: int, drain: float, on_drained: Callable[[], None] | None = None) -> dict:
    """Submit ``count`` trivial runs at once and wait for the queue to drain;
    ``on_drained`` runs then, before the executions are read back (B6 meters CPU there)."""
    ids: list[str] = []
    errors: Counter[str] = Counter()
    connections = 16
    async with _client(url, connections) as client:
        # At most one submission per connection in flight: a thousand requests queued in
        # httpcore's pool cost the client O(queue) CPU each (its pool rescans the queue),
        # which made this client, not the server, the burst's bottleneck on two cores.
        gate = asyncio.Semaphore(connections)

        async def submit(i: int) -> None:
            async with gate:
                await _submit(client, TRIVIAL, i, ids, errors)

        await asyncio.gather(*(submit(i) for i in range(count)))
        drained = await _wait_done(client, drain)
        if on_drained is not None:
            on_drained()
        executions = await _fetch(client, ids)
    return {"count": count, "ids": ids, "errors": errors, "executions": executions, "drained": drained}


# --- figures ------------------------------------------------------------------------------


def one(
    name: str,
    value: float,
    unit: str,
    *,
    aim: str | None = None,
    ok: Callable[[float], bool] | None = None,
    note: str | None = None,
) -> Figure:
    met = ok(value) if ok is not None and value == value else (False if ok is not None else None)
    return Figure(name, value, value, unit, 1, aim, met, note)


def dist(
    name: str,
    values: list[float],
    unit: str,
    *,
    aim: str | None = None,
    ok: Callable[[float, float], bool] | None = None,
    note: str | None = None,
) -> Figure:
    """p50/p95/p99; ``ok(p50, p99)`` decides ``met``."""
    figure = Figure.of(name, values, unit, note=note, with_p99=True)
    figure.aim = aim
    if ok is not None:
        figure.met = ok(figure.median, figure.p99) if values else False
    return figure


def _errors_note(errors: Counter[str], top: int = 6) -> str | None:
    if not errors:
        return None
    return ", ".join(f"{kind} x{count}" for kind, count in errors.most_common(top)) + (
        f" (+{len(errors) - top} kinds)" if len(errors) > top else ""
    )


def settle_time(opts: Options, n: int) -> float:
    """Seconds from the fleet ONLINE to the idle window: the registration storm's tail,
    and one heartbeat interval at the server's pace, so the window sees the pace a
    steady fleet keeps (workers registered early beat once more at the pace they
    registered with; docs/fleet.md#heartbeat-pacing)."""
    storm = 1.0 if opts.quick else 2.0
    rate = float(os.environ.get("FLUX_MAX_HEARTBEATS_PER_SECOND", DEFAULT_MAX_HEARTBEATS_PER_SECOND))
    paced = paced_interval(opts.heartbeat_interval, n, rate)
    return storm if paced <= opts.heartbeat_interval else max(storm, paced)


def run_unit(opts: Options, db: str, n: int, work: Path) -> list[Figure]:
    """One database, one fleet size: a fresh server (and scratch database) from start to stop."""
    from bench import b6_postgres

    raise_nofile_limit()
    tag = opts.tag(db, n)
    home = work / tag.replace(".", "-")
    burst_here = n == 10 and opts.burst > 0
    with sigterm_as_interrupt(), contextlib.ExitStack() as stack:
        database_url, db_needle = None, None
        if db == "postgres":
            database_url, note = stack.enter_context(b6_postgres.scratch_database(opts.pg_url))
            db_needle = database_url.rsplit("/", 1)[-1] if "scratch database" in note else None
            print(f"{tag}: {note}", flush=True)
        server = Server(home, database_url, opts.processes, opts.server_repo, opts.profile)
        stack.callback(server.stop)
        server.start()
        from flux.client import FluxClient

        with FluxClient(server.url) as client:
            client.register_file(write_workflow(home, SOURCE, "bench_workflows"))
        drain = 20.0 if opts.quick else max(30.0, opts.duration)
        online_timeout = 30.0 if opts.quick else max(60.0, n * 0.05)
        cap = (online_timeout + opts.idle_s + opts.duration + 2 * drain + 120) * 2  # the fleet's own stop if we die
        fleet = SynthFleet(server, home, n, opts, opts.burst_slots if burst_here else opts.slots, cap)
        stack.callback(fleet.stop)
        meter = CpuMeter(server.process.pid)
        db_meter = CpuMeter(postgres_database=db_needle) if db_needle else None
        watch = WorkerWatch()

        go = fleet.start()
        phases = {"startup": time.time()}
        online_s, online = wait_online(server.url, n, go, online_timeout, watch)
        online_wall = phases["idle"] = time.time()
        time.sleep(settle_time(opts, n))  # the registration storm's tail (first claims), and the fleet at its pace

        idle0, db0, t0 = meter.sample(), db_meter.sample() if db_meter else {}, time.monotonic()
        phases["idle_window"] = time.time()
        time.sleep(opts.idle_s)
        idle_wall = time.monotonic() - t0
        phases["idle_window_end"] = time.time()
        idle_cpu = CpuMeter.percent(idle0, meter.sample(), idle_wall)
        idle_db = CpuMeter.percent(db0, db_meter.sample(), idle_wall) if db_meter else None
        watch.poll(server.url)

        metrics_before_load = ""
        with contextlib.suppress(httpx.HTTPError):
            metrics_before_load = httpx.get(f"{server.url}/metrics", timeout=30).text
        load0, db0, t0 = meter.sample(), db_meter.sample() if db_meter else {}, time.monotonic()
        phases["load"] = time.time()
        load = asyncio.run(load_phase(server.url, opts.rate, opts.duration, drain, watch))
        with contextlib.suppress(httpx.HTTPError):
            load["rounds"] = _round_means(httpx.get(f"{server.url}/metrics", timeout=30).text, metrics_before_load)
        load_wall = time.monotonic() - t0
        load_cpu = CpuMeter.percent(load0, meter.sample(), load_wall)
        load_db = CpuMeter.percent(db0, db_meter.sample(), load_wall) if db_meter else None
        load_end_wall = phases["after_load"] = time.time()

        burst = asyncio.run(burst_phase(server.url, opts.burst, 60.0 if opts.quick else 120.0)) if burst_here else None
        phases["stop"] = time.time()
        watch.poll(server.url)
        metrics_text = ""
        with contextlib.suppress(httpx.HTTPError):
            metrics_text = httpx.get(f"{server.url}/metrics", timeout=30).text
        fleet_stats = fleet.stop()
    return figures(
        opts,
        tag,
        n,
        db,
        online_s,
        online,
        online_wall,
        idle_cpu,
        idle_db,
        load,
        load_cpu,
        load_db,
        load_end_wall,
        burst,
        watch,
        metrics_text,
        fleet_stats,
        phases,
    )


def figures(
    opts: Options,
    tag: str,
    n: int,
    db: str,
    online_s: float,
    online: int,
    online_wall: float,
    idle_cpu: float,
    idle_db: float | None,
    load: dict,
    load_cpu: float,
    load_db: float | None,
    load_end_wall: float,
    burst: dict | None,
    watch: WorkerWatch,
    metrics_text: str,
    fleet_stats: list[dict],
    phases: dict[str, float],
) -> list[Figure]:
    at1000 = n == 1000
    out: list[Figure] = []

    missing = [s["missing"] for s in fleet_stats if "missing" in s]
    stats = [s for s in fleet_stats if "missing" not in s]
    worker_errors: Counter[str] = Counter()
    for s in stats:
        worker_errors.update(s.get("errors", {}))
    reregistrations = sum(s.get("reregistrations", 0) for s in stats)
    crashed = Counter()
    for s in stats:
        crashed.update(s.get("crashed_workers", {}))
    registration_ms = [ms for s in stats for ms in s.get("registration_ms", [])]
    fleet_cpu = sum(s.get("cpu_s", 0) for s in stats)
    fleet_wall = max((s["stopped_at"] - s["started_at"] for s in stats), default=0.0)

    note = None if online >= n else f"only {online} of {n} ONLINE after the timeout"
    out.append(
        one(
            f"{tag}.online_s",
            online_s,
            "s",
            aim="< 10 s" if at1000 else None,
            ok=(lambda v: v < 10) if at1000 else None,
            note=note
            or f"registration round trip p50 {_pct(registration_ms, 50)} ms, "
            f"p99 {_pct(registration_ms, 99)} ms; {len(fleet_stats)} fleet processes",
        )
    )
    idle_aim = 12 if opts.samples == "busy" else 25  # issue 40: a busy fleet as cheap as a quiet one
    out.append(
        one(
            f"{tag}.idle_cpu_pct",
            idle_cpu,
            "% of a core",
            aim=f"< {idle_aim} %" if at1000 else None,
            ok=(lambda v: v < idle_aim) if at1000 else None,
            note=f"server process and children, {opts.idle_s:.0f} s idle window",
        )
    )
    if idle_db is not None:
        out.append(
            one(
                f"{tag}.pg_idle_cpu_pct",
                idle_db,
                "% of a core",
                note="PostgreSQL backends of the scratch database, same window",
            )
        )

    window = (phases["idle_window"], phases["idle_window_end"])
    paced = sum(window[0] <= t <= window[1] for s in stats for t, _ in s.get("heartbeats", [])) / max(
        window[1] - window[0], 1e-9
    )
    out.append(
        one(
            f"{tag}.heartbeats_per_s",
            paced,
            "beats/s",
            note=f"the fleet's heartbeats in the idle window, at the server's pace (--max-heartbeats-per-second; "
            f"each worker's own interval {opts.heartbeat_interval:g} s)",
        )
    )
    beats = [ms for s in stats for t, ms in s.get("heartbeats", []) if online_wall <= t <= load_end_wall]
    quiet_aims = at1000 and opts.samples == "quiet"
    out.append(
        dist(
            f"{tag}.heartbeat_ms",
            beats,
            "ms",
            aim=f"p99 <= {ROUND_TRIP_AIM:g} ms" if quiet_aims else None,
            ok=(lambda p50, p99: p99 <= ROUND_TRIP_AIM) if quiet_aims else None,
            note="round trip of each heartbeat, idle and load phases (client side, incl. pool wait)",
        )
    )

    executions = load["executions"]
    completed = [e for e in executions if e["state"] == "COMPLETED"]
    claim = [(e["claimed_at"] - e["scheduled_at"]) * 1000 for e in executions if e.get("claimed_at")]
    done = [(e["finished_at"] - e["scheduled_at"]) * 1000 for e in completed if e.get("finished_at")]
    retried = sum(1 for e in executions if e.get("attempt", 1) > 1)
    load_note = f"{len(completed)}/{load['count']} completed; {retried} needed more than one attempt" + (
        "" if load["drained"] else "; queue not empty at the deadline"
    )
    claim_aim, claim_ok = None, None
    if at1000 and opts.samples == "busy":  # issue 40: a busy fleet places as fast as a quiet one
        claim_aim, claim_ok = "p99 <= 200 ms", (lambda p50, p99: p99 <= 200)
    elif at1000:
        claim_aim, claim_ok = "p99 < 500 ms", (lambda p50, p99: p99 < 500)
    elif n == 3000 and db == "postgres" and opts.processes >= 2:
        claim_aim, claim_ok = "p99 < 1 s", (lambda p50, p99: p99 < 1000)
    out.append(
        dist(
            f"{tag}.submit_to_claimed_ms",
            claim,
            "ms",
            aim=claim_aim,
            ok=claim_ok,
            note=f"claimed_at - scheduled_at at {opts.rate:g} runs/s for {opts.duration:g} s; {load_note}",
        )
    )
    out.append(dist(f"{tag}.submit_to_completed_ms", done, "ms", note="finished_at - scheduled_at"))
    rounds = load.get("rounds")
    if rounds:
        out.append(
            one(
                f"{tag}.dispatch_round_ms",
                rounds["work"],
                "ms",
                note=f"server side, load phase: a placement round's mean work in the database thread; "
                f"{rounds['total']:.2f} ms from its start to its commit (writer queue included), "
                f"{rounds['count']:.0f} rounds (flux_dispatch_round_seconds)",
            )
        )
        if "cpu" in rounds:
            out.append(
                one(
                    f"{tag}.dispatch_round_cpu_ms",
                    rounds["cpu"],
                    "ms",
                    note="the same rounds' CPU time in that thread (no wait for the GIL or the database)",
                )
            )
    if completed:
        window = max(e["finished_at"] for e in completed) - min(e["scheduled_at"] for e in completed)
        achieved = len(completed) / window if window > 0 else float("nan")
    else:
        achieved = float("nan")
    out.append(
        one(
            f"{tag}.runs_per_s",
            achieved,
            "runs/s",
            note=f"completed / (last finished_at - first scheduled_at); offered {opts.rate:g}/s, "
            f"submissions took {load['submit_s']:.1f} s",
        )
    )
    out.append(one(f"{tag}.server_cpu_pct", load_cpu, "% of a core", note="load phase, submit to drained"))
    if load_db is not None:
        out.append(one(f"{tag}.pg_cpu_pct", load_db, "% of a core", note="PostgreSQL backends, load phase"))
    lost = load["count"] - len(completed)
    out.append(
        one(
            f"{tag}.lost",
            lost,
            "runs",
            aim="0" if at1000 else None,
            ok=(lambda v: v == 0) if at1000 else None,
            note="not COMPLETED by the drain deadline (includes failed submissions)",
        )
    )
    out.append(one(f"{tag}.submit_errors", sum(load["errors"].values()), "errors", note=_errors_note(load["errors"])))

    metric_evictions = 0.0
    # Counter samples only: prometheus_client also writes <name>_created (a timestamp) next to <name>_total.
    metric_lines = [
        line
        for line in metrics_text.splitlines()
        if "evict" in line.lower()
        and not line.startswith("#")
        and not line.split("{")[0].split()[0].endswith(("_created", "_timestamp", "_seconds"))
    ]
    for line in metric_lines:
        with contextlib.suppress(ValueError, IndexError):
            metric_evictions += float(line.split()[-1])
    evictions = max(watch.worst, reregistrations, metric_evictions)
    out.append(
        one(
            f"{tag}.evictions",
            evictions,
            "workers",
            aim="0" if at1000 else None,
            ok=(lambda v: v == 0) if at1000 else None,
            note=f"most STALE/OFFLINE at once in {watch.polls} polls of /metrics: {watch.worst}; "
            f"re-registrations after 401: {reregistrations}; "
            + (f"/metrics: {'; '.join(metric_lines[:3])}" if metric_lines else "/metrics has no eviction counter"),
        )
    )

    all_errors = worker_errors + Counter({f"submit:{k}": v for k, v in load["errors"].items()})
    if burst:
        all_errors += Counter({f"burst_submit:{k}": v for k, v in burst["errors"].items()})
    problems = [f"{sum(crashed.values())} worker tasks crashed ({dict(crashed)})"] if crashed else []
    when: Counter[str] = Counter()
    for s in stats:
        for t, _ in s.get("error_log", []):
            when[max((p for p, at in phases.items() if at <= t), key=phases.get, default="startup")] += 1
    if when:
        problems.append("worker errors by phase: " + ", ".join(f"{p} {when[p]}" for p in phases if when[p]))
    problems += missing
    out.append(
        one(
            f"{tag}.errors",
            sum(all_errors.values()) + sum(crashed.values()) + len(missing),
            "errors",
            aim="0" if at1000 else None,
            ok=(lambda v: v == 0) if at1000 else None,
            note="; ".join(filter(None, [_errors_note(all_errors), *problems])) or "none",
        )
    )
    out += observed(tag, stats, load["executions"], (online_wall, load_end_wall), quiet_aims)
    out.append(
        one(
            f"{tag}.fleet_cpu_pct",
            100.0 * fleet_cpu / fleet_wall if fleet_wall else float("nan"),
            "% of a core",
            note=f"all synthetic worker processes together (client side), {len(stats)} processes",
        )
    )

    if burst is not None:
        finished = [e for e in burst["executions"] if e["state"] == "COMPLETED"]
        if finished:
            window = max(e["finished_at"] for e in finished) - min(e["scheduled_at"] for e in finished)
            rate = len(finished) / window if window > 0 else float("nan")
        else:
            rate = float("nan")
        out.append(
            one(
                f"{tag}.burst_runs_per_s",
                rate,
                "runs/s",
                aim=">= 200 runs/s",
                ok=lambda v: v >= 200,
                note=f"{burst['count']} runs at once, {len(finished)} completed, {opts.burst_slots} slots/worker; "
                "runs / (last finished_at - first scheduled_at)"
                + ("" if burst["drained"] else "; queue not empty at the deadline"),
            )
        )
    return out


def _round_means(metrics_text: str, before: str = "") -> dict[str, float]:
    """Mean ms of ``flux_dispatch_round_seconds`` by part, and the round count, since
    the scrape ``before``; {} if absent."""
    found: Counter[tuple[str, str]] = Counter()
    for text, sign in ((metrics_text, 1), (before, -1)):
        for line in text.splitlines():
            match = re.match(r'flux_dispatch_round_seconds_(sum|count)\{part="(\w+)"\} (\S+)', line)
            if match:
                found[(match[2], match[1])] += sign * float(match[3])
    if not found.get(("work", "count")) or not found.get(("total", "count")):
        return {}
    means = {
        part: 1000 * found[(part, "sum")] / found[(part, "count")]
        for part in ("work", "total", "cpu")
        if found.get((part, "count"))
    }
    return {**means, "count": found[("total", "count")]}


def _pct(values: list[float], q: int) -> str:
    from bench.common import _num

    if not values:
        return "nan"
    if len(values) == 1:
        return _num(values[0])
    import statistics

    return _num(statistics.quantiles(values, n=100, method="inclusive")[q - 1] if q < 100 else max(values))


# --- entry points -------------------------------------------------------------------------


def units(opts: Options, work: Path) -> list[tuple[str, Callable[[], list[Figure]]]]:
    """(key, callable) per database and fleet size, in order; each is independent."""
    return [
        (opts.tag(db, n), (lambda db=db, n=n: run_unit(opts, db, n, work)))
        for db in opts.databases
        for n in opts.workers
    ]


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """B7's options; ``prefix='b7-'`` inside ``python -m bench``."""
    p = f"--{prefix}"
    parser.add_argument(f"{p}workers", default=None, help="fleet sizes, comma-separated [10,100,1000,3000]")
    parser.add_argument(f"{p}database", choices=("sqlite", "postgres", "both"), default=None, help="[both]")
    parser.add_argument(
        f"{p}processes",
        type=int,
        default=None,
        help="server processes (passed as 'flux start server --processes N' when N > 1) [1]",
    )
    parser.add_argument(f"{p}rate", type=float, default=None, help="runs/s in the load phase [20]")
    parser.add_argument(f"{p}duration", type=float, default=None, help="seconds of the load phase [30; quick 8]")
    parser.add_argument(f"{p}idle", type=float, default=None, help="seconds of the idle CPU window [15; quick 5]")
    parser.add_argument(f"{p}burst", type=int, default=None, help="runs in the N=10 burst (0: none) [1000; quick 200]")
    parser.add_argument(f"{p}per-process", type=int, default=None, help="synthetic workers per OS process [250]")
    parser.add_argument(
        f"{p}samples",
        choices=("quiet", "busy"),
        default=None,
        help="quiet: heartbeats carry no sample; busy: a material change on every beat [quiet]",
    )
    parser.add_argument(
        f"{p}server-repo",
        type=Path,
        default=None,
        metavar="PATH",
        help="run the server from this checkout (a baseline), the fleet from this one",
    )


def options_from(args: argparse.Namespace, prefix: str = "") -> Options:
    a = prefix.replace("-", "_")
    get = lambda name: getattr(args, f"{a}{name}")  # noqa: E731
    return Options.make(
        quick=args.quick,
        workers=get("workers"),
        database=get("database"),
        processes=get("processes"),
        rate=get("rate"),
        duration=get("duration"),
        idle=get("idle"),
        burst=get("burst"),
        per_process=get("per_process"),
        pg_url=args.pg_url,
        samples=get("samples"),
        server_repo=get("server_repo"),
        profile=getattr(args, "profile", None),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.b7_fleet", description="B7 fleet scale (issue 22)")
    parser.add_argument("--quick", action="store_true", help="N=10,100 on SQLite, short phases (< 90 s)")
    parser.add_argument("--pg-url", default=os.environ.get("FLUX_BENCH_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--keep", action="store_true", help="keep the work folder (server and fleet logs)")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="run the server under bench.sampler, one report per unit in DIR",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    add_arguments(parser)
    args = parser.parse_args(argv)
    opts = options_from(args)
    work = Path(tempfile.mkdtemp(prefix="flux-b7-"))
    print(
        f"B7 fleet scale: workers {opts.workers} on {', '.join(opts.databases)}, server processes {opts.processes}, "
        f"{opts.rate:g} runs/s for {opts.duration:g} s; work folder {work}",
        flush=True,
    )
    print(f"{'name':<48} {'median':>10} {'p95':>10}  unit", flush=True)
    results: list[Figure] = []
    statuses: dict[str, dict] = {}
    t_start = time.monotonic()
    try:
        for key, fn in units(opts, work):
            t0 = time.monotonic()
            try:
                figures_ = fn()
                for figure in figures_:
                    print(figure.line(), flush=True)
                results += figures_
                statuses[key] = {"status": "ok"}
            except Skipped as exc:
                print(f"{key}: SKIPPED: {exc}", flush=True)
                statuses[key] = {"status": "skipped", "reason": str(exc)}
            except Exception as exc:  # noqa: BLE001 - recorded; the next unit still runs
                print(f"{key}: ERROR: {type(exc).__name__}: {exc}", flush=True)
                statuses[key] = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"}
            statuses[key]["duration_s"] = round(time.monotonic() - t0, 1)
    except KeyboardInterrupt:
        print("interrupted: stopping the fleet and the server", flush=True)
    finally:
        stop_all()
        if args.keep:
            print(f"logs kept in {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"done in {time.monotonic() - t_start:.1f}s", flush=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"options": opts.__dict__, "scenarios": statuses, "figures": [f.record() for f in results]},
                indent=2,
                default=str,
            )
            + "\n"
        )
    return 1 if any(s["status"] == "error" for s in statuses.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
