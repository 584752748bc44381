"""B6's burst: one-task runs submitted at once to 10 workers, on PostgreSQL (issue 40).

The server runs on a scratch database (``b6_postgres.scratch_database``); the workers are
``bench.fleet_synth`` processes (10 workers with 50 slots each, as B7's burst), so the
figure is the server's and the database's, not a runner's. Each repeat submits COUNT
runs (16 in flight, as B7) and waits until the queue is empty; the rate is completed
runs / (last ``finished_at`` - first ``scheduled_at``). Beside it: the server's and
PostgreSQL's CPU per run (load on the machine does not move a CPU figure much) and the
statements the server sent per run (``flux_db_statements_total``).

    python -m bench.b6_burst [--quick] [--pg-url URL] [--count 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from pathlib import Path

import httpx

from bench.common import Figure, print_figures, write_workflow
from bench.workflows import SOURCE

WORKERS, SLOTS = 10, 50


def _statements(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if re.match(r"flux_db_statements_total\{", line))


def run(pg_url: str, work: Path, count: int, repeats: int) -> list[Figure]:
    from bench import b6_postgres, b7_fleet
    from flux.client import FluxClient

    rates, server_cpu, db_cpu, statements = [], [], [], []
    with b6_postgres.scratch_database(pg_url) as (url, note):
        print(f"B6.burst: {note}", flush=True)
        needle = url.rsplit("/", 1)[-1] if "scratch database" in note else None
        server = b7_fleet.Server(work, url, 1)
        opts = b7_fleet.Options(workers=[WORKERS], burst=count, burst_slots=SLOTS)
        fleet = None
        try:
            server.start()
            with FluxClient(server.url) as client:
                client.register_file(write_workflow(work, SOURCE, "bench_workflows"))
            fleet = b7_fleet.SynthFleet(server, work, WORKERS, opts, SLOTS, 600.0)
            go = fleet.start()
            b7_fleet.wait_online(server.url, WORKERS, go, 60.0, b7_fleet.WorkerWatch())
            time.sleep(1.0)
            meter, db_meter = b7_fleet.CpuMeter(server.process.pid), b7_fleet.CpuMeter(postgres_database=needle)
            for _ in range(repeats):
                cpu0, db0, st0 = meter.sample(), db_meter.sample(), _statements(server.url)
                burst = asyncio.run(b7_fleet.burst_phase(server.url, count, 120.0))
                finished = [e for e in burst["executions"] if e["state"] == "COMPLETED"]
                if len(finished) > 1:
                    window = max(e["finished_at"] for e in finished) - min(e["scheduled_at"] for e in finished)
                    rates.append(len(finished) / window)
                server_cpu.append(_cpu_ms(cpu0, meter.sample()) / count)
                db_cpu.append(_cpu_ms(db0, db_meter.sample()) / count)
                statements.append((_statements(server.url) - st0) / count)
        finally:
            if fleet is not None:
                fleet.stop()
            server.stop()
    return [
        Figure.of("B6.pg.burst_runs_per_s", rates, "runs/s", aim=">= 500 runs/s", check=lambda m, _p: m >= 500,
                  note=f"{count} one-task runs at once on {WORKERS} synthetic workers x {SLOTS} slots, {repeats} repeats"),
        Figure.of("B6.pg.burst_server_cpu_per_run", server_cpu, "ms CPU", note="the server process"),
        Figure.of("B6.pg.burst_postgres_cpu_per_run", db_cpu, "ms CPU", note="the PostgreSQL backends of the scratch database"),
        Figure.of("B6.pg.burst_statements_per_run", statements, "statements", note="flux_db_statements_total (reads + writes)"),
    ]


def counts(quick: bool) -> tuple[int, int]:
    """(runs a burst, repeats)."""
    return (200, 2) if quick else (1000, 3)


def _cpu_ms(before: dict[int, float], after: dict[int, float]) -> float:
    return 1000 * sum(max(0.0, t - before.get(pid, 0.0)) for pid, t in after.items())


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m bench.b6_burst", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 runs, 2 repeats")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    count, repeats = counts(args.quick)
    count, repeats = args.count or count, args.repeats or repeats
    with tempfile.TemporaryDirectory(prefix="flux-b6-burst-") as work:
        print_figures(run(args.pg_url, Path(work), count, repeats))


if __name__ == "__main__":
    main()
