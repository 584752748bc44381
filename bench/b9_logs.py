"""B9 log capture (tracker issue 14): a task that prints 100,000 lines.

    python -m bench.b9_logs                 # 100,000 lines, capture on and off, 3 runs each
    python -m bench.b9_logs --quick         # 20,000 lines, 1 run each

One server (SQLite) and one worker at a time, real processes (``flux.local``):
the worker ``capture`` ships what the execution prints to the server (docs/logs.md),
the worker ``plain`` runs with ``--no-capture-output`` (the child's output goes to the
worker's stderr, a file). For each run it prints:

- ``lines_captured``: ``stdout`` lines the server holds for the execution (all pages of
  ``GET /executions/ID/logs``), against the lines printed;
- ``run_s``: the execution's ``started_at`` -> ``finished_at`` (both stamped on the same
  host), capture on and off, and their ratio (the overhead of capture);
- ``worker_peak_rss_mib`` (the worker and its children) and ``server_peak_rss_mib``,
  sampled every 20 ms while the execution runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bench.common import Figure, print_figures, write_workflow
from flux.client import FluxClient
from flux.local import LocalCluster

SOURCE = """
    from flux import task, workflow

    @task
    def chatter(n):
        for i in range(n):
            print(f"line {i:06d} of a task that talks a lot")
        return n

    @workflow
    async def talkative(ctx):
        return await chatter(ctx.input)
"""


class PeakRSS:
    """The largest summed RSS of a process and its descendants, sampled on a thread."""

    def __init__(self, pid: int, interval: float = 0.02):
        self.process, self.interval, self.peak = psutil.Process(pid), interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                tree = [self.process, *self.process.children(recursive=True)]
                self.peak = max(self.peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def captured_stdout(client: FluxClient, execution_id: str) -> int:
    count, after = 0, 0
    while True:
        page = client._request(
            "GET", f"/executions/{execution_id}/logs", params={"after": after, "limit": 5000, "stream": "stdout"}
        )
        count += len(page["lines"])
        if not page["lines"]:
            return count
        after = page["next_after"]


def one_run(cluster: LocalCluster, client: FluxClient, worker: str, lines: int) -> dict:
    with PeakRSS(cluster.workers[worker].pid) as worker_rss, PeakRSS(cluster.server.pid) as server_rss:
        done = client.run("talkative", lines, wait=600)
    if done["state"] != "COMPLETED":
        raise RuntimeError(f"execution {done['id']} ended {done['state']}: {done.get('error')}")
    return {
        "run_s": done["finished_at"] - done["started_at"],
        "captured": captured_stdout(client, done["id"]),
        "worker_rss": worker_rss.peak / 2**20,
        "server_rss": server_rss.peak / 2**20,
    }


def run(lines: int, repeats: int) -> list[Figure]:
    results: dict[str, list[dict]] = {"capture": [], "plain": []}
    with tempfile.TemporaryDirectory(prefix="flux-b9-") as home, LocalCluster(Path(home)) as cluster:
        cluster.start_server()
        with FluxClient(cluster.server_url) as client:
            client.register_file(write_workflow(Path(home), SOURCE, "talkative"))
            for worker, extra in (("capture", ()), ("plain", ("--no-capture-output",))):
                cluster.start_worker(worker, max_concurrent_executions=1, heartbeat_interval=5.0, extra_args=extra)
                client.run("talkative", 10, wait=60)  # warm the child and the workflow module
                for _ in range(repeats):
                    results[worker].append(one_run(cluster, client, worker, lines))
                cluster.stop_worker(worker)
    on, off = results["capture"], results["plain"]
    ratio = statistics.median(r["run_s"] for r in on) / max(statistics.median(r["run_s"] for r in off), 1e-9)
    return [
        Figure.of(
            "B9.lines_captured", [r["captured"] for r in on], "lines", aim=f"all {lines}", check=lambda m, p: m == lines
        ),
        Figure.of("B9.capture_on.run_s", [r["run_s"] for r in on], "s"),
        Figure.of(
            "B9.capture_off.run_s",
            [r["run_s"] for r in off],
            "s",
            note="--no-capture-output: output to the worker's stderr",
        ),
        Figure.of("B9.capture_overhead", [ratio], "x", note="median run_s, capture on / off"),
        Figure.of(
            "B9.capture_on.worker_peak_rss_mib", [r["worker_rss"] for r in on], "MiB", note="worker + its children"
        ),
        Figure.of("B9.capture_off.worker_peak_rss_mib", [r["worker_rss"] for r in off], "MiB"),
        Figure.of("B9.capture_on.server_peak_rss_mib", [r["server_rss"] for r in on], "MiB"),
        Figure.of("B9.capture_off.server_peak_rss_mib", [r["server_rss"] for r in off], "MiB"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 lines, one run each")
    parser.add_argument("--lines", type=int, default=None, help="lines the task prints [100000; 20000 with --quick]")
    parser.add_argument("--repeats", type=int, default=None, help="runs per worker [3; 1 with --quick]")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    lines = args.lines or (20_000 if args.quick else 100_000)
    repeats = args.repeats or (1 if args.quick else 3)
    figures = run(lines, repeats)
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
