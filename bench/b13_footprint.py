"""B13 worker footprint (tracker issue 18's "B9 worker footprint"): memory of an idle
worker with its children, after a burst, after the idle timeout; start-up to ONLINE
(the CPU one worker takes, and the time 50 started at once take, beside the time 50
processes take that only import the libraries a worker needs: the floor).

    python -m bench.b13_footprint              # 20 slots, default idle timeout (60 s), 50 workers started at once
    python -m bench.b13_footprint --quick      # idle timeout 2 s, 10 workers
    python -m bench.b13_footprint --idle-only --worker-tree ../main   # idle CPU alone, of another checkout's workers

Idle CPU: ``IDLE_WORKERS`` workers (heartbeat every 5 s) sit idle on one server; the CPU
seconds they and their children (template, warm child) take over each window of
``--idle-window`` seconds (psutil's user + system times, not wall time), shared out per
worker, as a share of one core; the figure is the median over the windows.

Memory is PSS (proportional set size: shared pages split among the processes that
map them), summed over the worker and its children, read from /proc by psutil; RSS
summed is printed beside it. Each figure is the median of five readings 0.2 s apart.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from bench.common import BenchCluster, Figure, precompile, print_figures, tree_cpu, write_workflow
from flux.client import FluxClient

SOURCE = """
    import time
    from flux import task, workflow

    @task
    def hold(seconds):
        time.sleep(seconds)
        return seconds

    @workflow
    async def busy(ctx):
        return await hold(ctx.input)
"""


def memory(pid: int) -> tuple[float, float, int]:
    """PSS and RSS (MiB) of a process and its descendants, and how many children."""
    readings = []
    for _ in range(5):
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
        pss = rss = 0
        for process in tree:
            try:
                info = process.memory_full_info()
            except psutil.Error:
                continue
            pss += info.pss
            rss += info.rss
        readings.append((pss / 2**20, rss / 2**20, len(tree) - 1))
        time.sleep(0.2)
    return (statistics.median(r[0] for r in readings), statistics.median(r[1] for r in readings), readings[-1][2])


def footprint(slots: int, idle_timeout: float) -> dict[str, tuple[float, float, int]]:
    with tempfile.TemporaryDirectory(prefix="flux-b13-") as home, BenchCluster(Path(home)) as cluster:
        cluster.start_server()
        worker = cluster.start_worker(
            "w1",
            max_concurrent_executions=slots,
            heartbeat_interval=5.0,
            extra_args=("--child-idle-timeout", str(idle_timeout)),
        )
        time.sleep(3)
        seen = {"idle": memory(worker.pid)}
        with FluxClient(cluster.server_url) as client:
            client.register_file(write_workflow(Path(home), SOURCE, "busy"))
            burst = [client.run("busy", 2.0)["id"] for _ in range(slots)]
            for execution_id in burst:
                if client.wait(execution_id, 120)["state"] != "COMPLETED":
                    raise RuntimeError(f"{execution_id} did not complete")
        seen["after_burst"] = memory(worker.pid)
        time.sleep(idle_timeout + 10)
        seen["after_idle_timeout"] = memory(worker.pid)
    return seen


def start_up(count: int) -> tuple[list[float], float]:
    """Seconds from starting each of ``count`` worker processes at once to ONLINE.

    ONLINE is when the server registered a worker (its ``registered_at``), so the
    benchmark polls only twice a second: polling faster took CPU from the workers it
    measures."""
    with tempfile.TemporaryDirectory(prefix="flux-b13-fleet-") as home, BenchCluster(Path(home)) as cluster:
        cluster.start_server()
        began, began_wall = time.monotonic(), time.time()
        for n in range(count):
            cluster.start_worker(f"w{n:03d}", heartbeat_interval=5.0, wait=False)
        online: dict[str, float] = {}
        while len(online) < count and time.monotonic() < began + 120:
            time.sleep(0.5)
            for worker in httpx.get(f"{cluster.server_url}/workers", timeout=10).json():
                if worker["state"] == "ONLINE":
                    online.setdefault(worker["name"], worker["registered_at"] - began_wall)
        return sorted(online.values()), time.monotonic() - began


#: What a worker must import whatever flux itself does: the libraries of its session
#: (asyncio, httpx over httpcore and anyio's asyncio backend), its probe and its command
#: line; trio and httpx's own command line left out, as a worker leaves them out.
LIBRARIES = """
import sys, types
sys.modules["trio"] = None
sys.modules["httpx._main"] = types.SimpleNamespace(main=lambda: None)
import asyncio, click, httpx, httpcore, psutil, anyio._backends._asyncio
"""


def import_floor(count: int) -> float:
    """Seconds ``count`` processes started at once take to import only ``LIBRARIES``:
    the floor under ``start_up`` that no change to flux can lower."""
    began = time.monotonic()
    processes = [subprocess.Popen([sys.executable, "-c", LIBRARIES]) for _ in range(count)]
    for process in processes:
        if process.wait(timeout=120) != 0:
            raise SystemExit("importing the libraries failed")
    return time.monotonic() - began


def start_cpu(runs: int = 5) -> list[float]:
    """CPU seconds a worker and its warm child take from start to ONLINE, one worker at a time."""
    with tempfile.TemporaryDirectory(prefix="flux-b13-cpu-") as home, BenchCluster(Path(home)) as cluster:
        cluster.start_server()
        spent = []
        for n in range(runs):
            worker = cluster.start_worker(f"c{n}", heartbeat_interval=5.0)
            root = psutil.Process(worker.pid)
            spent.append(sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)]))
            cluster.stop_worker(f"c{n}")
        return spent


#: Workers measured idle at once (one server), and windows of each.
IDLE_WORKERS = 5
IDLE_WINDOWS = 3


def idle_cpu(window: float, worker_tree: Path | None = None) -> list[float]:
    """Per cent of one core an idle worker (with its children) takes, per window: the
    CPU seconds of all ``IDLE_WORKERS`` over the window, shared out (psutil counts in
    clock ticks of 10 ms: five workers together read five times finer than one).

    ``worker_tree``: run the workers from that checkout (``PYTHONPATH``), the server from
    this one: before and after a change, in one sitting."""
    env = {"PYTHONPATH": str(worker_tree.resolve())} if worker_tree else None
    with tempfile.TemporaryDirectory(prefix="flux-b13-idle-") as home, BenchCluster(Path(home)) as cluster:
        cluster.start_server()
        # ``python -m`` puts its working directory first on the path: theirs, not ours
        with contextlib.chdir(worker_tree or Path.cwd()):
            workers = [
                cluster.start_worker(f"idle{n}", max_concurrent_executions=20, heartbeat_interval=5.0, env=env)
                for n in range(IDLE_WORKERS)
            ]
        time.sleep(10)  # registered, pools warm, the first beats sent
        shares = []
        for _ in range(IDLE_WINDOWS):
            before = [tree_cpu(worker.pid) for worker in workers]
            time.sleep(window)
            spent = sum(tree_cpu(worker.pid) - taken for worker, taken in zip(workers, before))
            shares.append(spent / (window * len(workers)) * 100)
        return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2 s idle timeout, 10 workers at once")
    parser.add_argument("--slots", type=int, default=20, help="the worker's slots, all filled by the burst [20]")
    parser.add_argument("--idle-timeout", type=float, default=None, help="--child-idle-timeout [60; 2 with --quick]")
    parser.add_argument("--workers", type=int, default=None, help="workers started at once [50; 10 with --quick]")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--idle-window", type=float, default=None, help="seconds of each idle CPU window [120; 30 with --quick]"
    )
    parser.add_argument("--idle-only", action="store_true", help="measure idle CPU only")
    parser.add_argument(
        "--worker-tree",
        type=Path,
        default=None,
        help="with --idle-only: run the idle workers from this checkout (before/after in one sitting)",
    )
    args = parser.parse_args()
    idle_timeout = args.idle_timeout if args.idle_timeout is not None else (2.0 if args.quick else 60.0)
    count = args.workers or (10 if args.quick else 50)
    window = args.idle_window or (30.0 if args.quick else 120.0)
    precompile()
    idle = Figure.of(
        "B13.idle.cpu_percent_per_worker",
        idle_cpu(window, args.worker_tree),
        "% core",
        aim="<= 0.05",
        check=lambda m, p: m <= 0.05,
        note=f"{IDLE_WORKERS} idle workers, {IDLE_WINDOWS} windows of {window:g} s: CPU s (psutil) / window / worker"
        + (f"; workers from {args.worker_tree}" if args.worker_tree else ""),
    )
    if args.idle_only:
        print_figures([idle], args.json)
        return
    figures = [idle]
    for phase, (pss, rss, children) in footprint(args.slots, idle_timeout).items():
        aimed = phase != "after_burst"  # the aim: idle, and again after the idle timeout
        figures.append(
            Figure.of(
                f"B13.{phase}.pss_mib",
                [pss],
                "MiB",
                note=f"worker + {children} children",
                aim="<= 50" if aimed else None,
                check=(lambda m, p: m <= 50) if aimed else None,
            )
        )
        figures.append(Figure.of(f"B13.{phase}.rss_mib", [rss], "MiB", note="summed RSS"))
    figures.append(Figure.of("B13.start_up.cpu_s", start_cpu(), "s", note="worker + warm child, start to ONLINE"))
    online, total = start_up(count)
    if len(online) < count:
        raise SystemExit(f"only {len(online)} of {count} workers came online in 120 s")
    figures.append(Figure.of(f"B13.start_up.{count}_workers.online_s", online, "s", with_p99=True))
    figures.append(
        Figure.of(
            f"B13.start_up.{count}_workers.all_online_s", [online[-1]], "s", aim="<= 5", check=lambda m, p: m <= 5
        )
    )
    figures.append(
        Figure.of(
            f"B13.start_up.{count}_import_floor_s",
            [import_floor(count) for _ in range(3)],
            "s",
            note="processes that only import the libraries a worker needs",
        )
    )
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
