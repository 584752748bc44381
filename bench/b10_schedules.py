"""B10 schedules (tracker issue 17): 10,000 one-minute schedules on one server.

    python -m bench.b10_schedules              # 10,000 schedules (cron '* * * * *'), 2 minutes of fires
    python -m bench.b10_schedules --quick      # 300 schedules every 5 s, 2 rounds

One server (SQLite), real process (``flux.local``), no worker: the schedules use
``overlap=allow_all`` so that each due time fires although the run before it still
waits (with the default ``skip`` only the first minute would fire). All schedules share
one due time a round (the worst case: a herd; ``jitter`` would spread it). It prints:

- ``fire_lateness_ms``: due time -> execution created (``scheduled_at - scheduled_for``,
  read from the server's database after the run), p50/p95/p99 over every fire;
- ``round_s``: due time -> the last execution of the round created;
- ``server_cpu_pct``: the server process's CPU over the measured rounds, in % of one core;
  ``server_cpu_s_per_round``: its CPU seconds per round;
- ``fires`` against schedules x rounds (aim: all, none doubled).
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from bench.common import Figure, print_figures, write_workflow
from flux.client import FluxClient
from flux.local import LocalCluster

SOURCE = """
    from flux import workflow

    @workflow
    async def tick(ctx):
        return ctx.input
"""


def create(url: str, count: int, timing: dict) -> float:
    """Create the schedules from 8 client threads; returns seconds taken."""
    started = time.monotonic()

    def batch(names: range) -> None:
        with FluxClient(url, timeout=120) as client:
            for n in names:
                client.create_schedule(f"s{n:05d}", "tick", input=n, overlap="allow_all", **timing)

    step = math.ceil(count / 8)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(batch, [range(i, min(i + step, count)) for i in range(0, count, step)]))
    return time.monotonic() - started


def run(count: int, period: float, timing: dict, rounds: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="flux-b10-") as home, LocalCluster(Path(home)) as cluster:
        cluster.start_server()
        server = psutil.Process(cluster.server.pid)
        with FluxClient(cluster.server_url) as client:
            client.register_file(write_workflow(Path(home), SOURCE, "tick"))
            created_s = create(cluster.server_url, count, timing)
            first_due = min(client.show_schedule(f"s{n:05d}")["next_fire_times"][0] for n in (0, count - 1))
            # measure from the first due time on: wait for it, then whole rounds
            start = (math.floor(time.time() / period) + 1) * period
            time.sleep(max(0.0, start - time.time() - 0.5))
            cpu_before = sum(server.cpu_times()[:2])
            window_start = time.time()
            end = start + rounds * period
            time.sleep(max(0.0, end - time.time() - 0.5))
            cpu_s = sum(server.cpu_times()[:2]) - cpu_before
            window_s = time.time() - window_start
        cluster.stop_server()
        with sqlite3.connect(Path(home) / "flux.db") as db:
            rows = db.execute(
                "SELECT scheduled_for, scheduled_at FROM executions WHERE scheduled_for >= ? AND scheduled_for < ?",
                (start - 0.001, end - 0.001),
            ).fetchall()
            doubled = db.execute(
                "SELECT count(*) - count(DISTINCT schedule || '@' || scheduled_for) FROM executions"
                " WHERE schedule IS NOT NULL"
            ).fetchone()[0]
    lateness = [(at - due) * 1000 for due, at in rows]
    by_round: dict[float, float] = {}
    for due, at in rows:
        by_round[due] = max(by_round.get(due, 0.0), at - due)
    expected = count * rounds
    return [
        Figure.of(
            "B10.create_schedules_per_s", [count / created_s], "/s", note=f"{count} POST /schedules from 8 threads"
        ),
        Figure.of(
            "B10.fires",
            [len(rows)],
            "executions",
            aim=f"{expected} ({count} x {rounds} rounds), none doubled",
            check=lambda m, p: m == expected and doubled == 0,
            note=f"doubled: {doubled}; first due {first_due}",
        ),
        Figure.of("B10.fire_lateness_ms", lateness, "ms", with_p99=True, note="due -> execution created"),
        Figure.of("B10.round_s", list(by_round.values()), "s", note="due -> the round's last execution created"),
        Figure.of(
            "B10.server_cpu_pct",
            [cpu_s / window_s * 100],
            "% of a core",
            note=f"over {window_s:.0f} s, {rounds} rounds",
        ),
        Figure.of("B10.server_cpu_s_per_round", [cpu_s / rounds], "s"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 schedules every 5 s, 2 rounds")
    parser.add_argument("--schedules", type=int, default=None, help="schedules [10000; 300 with --quick]")
    parser.add_argument("--rounds", type=int, default=2, help="due times measured per schedule [2]")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    count = args.schedules or (300 if args.quick else 10_000)
    period, timing = (5.0, {"every": "5s"}) if args.quick else (60.0, {"cron": "* * * * *"})
    figures = run(count, period, timing, args.rounds)
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
