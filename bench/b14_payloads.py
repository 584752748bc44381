"""B14 payloads (tracker issue 18's "B10 payloads"): one-task runs whose input comes
back as the task's result, from 1 KB up to the payload limit, and one over it.

    python -m bench.b14_payloads              # 1 KB, 100 KB, 1 MB, 10 MB, 32 MB (the default limit)
    python -m bench.b14_payloads --quick      # 1 KB and 1 MB

For each size it prints submit→completed (the client's submit to its wait returning
COMPLETED, output included), the JSON bytes stored for a run over the payload size
(the input and the task's result: 2.0 when each is stored once; 3 before, when
WORKFLOW_SCHEDULED held a second copy of the input), and the server's RSS after the runs;
then how long refusing an input one byte over the limit takes (413, nothing stored).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from bench.common import BenchCluster, Figure, print_figures, write_workflow
from flux.client import FluxClient, FluxClientError

SOURCE = """
    from flux import task, workflow

    @task
    def same(value):
        return value

    @workflow
    async def echo(ctx):
        return len(await same(ctx.input))
"""
LIMIT = 32 * 1024**2


def stored_bytes(home: Path, execution_id: str) -> int:
    """Bytes of JSON the database holds for one execution: its row's payloads and its log."""
    with sqlite3.connect(home / "flux.db") as db:
        row = db.execute(
            "SELECT length(input) + coalesce(length(output), 0) FROM executions WHERE id = ?", (execution_id,)
        )
        log = db.execute(
            "SELECT coalesce(sum(length(value)), 0) FROM execution_events WHERE execution_id = ?", (execution_id,)
        )
        return row.fetchone()[0] + log.fetchone()[0]


def run(sizes: list[int], repeats: int) -> list[Figure]:
    figures = []
    with tempfile.TemporaryDirectory(prefix="flux-b14-") as home, BenchCluster(Path(home)) as cluster:
        cluster.start_server()
        cluster.start_worker("w1", heartbeat_interval=5.0)
        with FluxClient(cluster.server_url, timeout=120) as client:
            client.register_file(write_workflow(Path(home), SOURCE, "echo"))
            client.run("echo", "warm", wait=60)
            for size in sizes:
                text = "x" * (size - 2)  # its JSON is ``size`` bytes
                samples, grown = [], []
                for _ in range(repeats):
                    began = time.perf_counter()
                    done = client.run("echo", text, wait=120)
                    samples.append((time.perf_counter() - began) * 1000)
                    if done["state"] != "COMPLETED" or done["output"] != len(text):
                        raise RuntimeError(f"{size}: {done['state']} {done.get('error')}")
                    grown.append(stored_bytes(Path(home), done["id"]) / size)
                label = f"{size // 1024}KiB" if size < 1024**2 else f"{size // 1024**2}MiB"
                figures.append(Figure.of(f"B14.{label}.submit_completed_ms", samples, "ms"))
                figures.append(
                    Figure.of(
                        f"B14.{label}.stored_copies",
                        grown,
                        "x",
                        note="JSON bytes stored for a run / payload size: the input and the task's result, once each",
                    )
                )
            figures.append(
                Figure.of(
                    "B14.server_rss_mib",
                    [psutil.Process(cluster.server.pid).memory_info().rss / 2**20],
                    "MiB",
                    note="after the runs",
                )
            )
            over = "y" * (LIMIT - 1)  # 1 byte over once JSON-quoted
            refusals = []
            for _ in range(3):
                began = time.perf_counter()
                try:
                    client.run("echo", over)
                except FluxClientError as exc:
                    if exc.status != 413:
                        raise
                refusals.append((time.perf_counter() - began) * 1000)
            figures.append(Figure.of("B14.over_limit.refused_ms", refusals, "ms", note="413, names the limit"))
            listed = httpx.get(f"{cluster.server_url}/executions", params={"limit": 50}, timeout=60)
            figures.append(
                Figure.of("B14.list_bytes", [len(listed.content)], "bytes", note="a default page after the runs")
            )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 KB and 1 MB, 3 runs each")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    sizes = [1024, 1024**2] if args.quick else [1024, 100 * 1024, 1024**2, 10 * 1024**2, LIMIT]
    figures = run(sizes, repeats=3 if args.quick else 5)
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
