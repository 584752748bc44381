"""B6's burst: one-task runs submitted at once to 10 workers, on PostgreSQL (issue 40).

The server runs on a scratch database (``b6_postgres.scratch_database``); the workers are
``bench.fleet_synth`` processes (10 workers with 50 slots each, as B7's burst), so the
figure is the server's and the database's, not a runner's. Each repeat submits COUNT
runs (16 in flight, as B7) and waits until the queue is empty; the rate is completed
runs / (last ``finished_at`` - first ``scheduled_at``). Beside it, from submission to
drain: the CPU per run of the server, PostgreSQL, the synthetic fleet, the submitting
client and the whole machine (load on the machine does not move a CPU figure much), the
rate the machine's cores would allow at that cost (its ceiling here), and the statements
the server sent per run (``flux_db_statements_total``).

    python -m bench.b6_burst [--quick] [--pg-url URL] [--count 1000] [--repeats 3] [--processes 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
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


class Meters:
    """CPU over a burst, by whom: the server, PostgreSQL's backends of the scratch database,
    the synthetic fleet, this process (the submitting client) and the whole machine
    (``psutil.cpu_times``: everything but idle and I/O wait)."""

    def __init__(self, server_pid: int, database: str | None, fleet_pids: list[int]):
        from bench import b7_fleet

        self.meters = {
            "server": [b7_fleet.CpuMeter(server_pid)],
            "postgres": [b7_fleet.CpuMeter(postgres_database=database)],
            "fleet": [b7_fleet.CpuMeter(pid) for pid in fleet_pids],
            "client": [b7_fleet.CpuMeter(os.getpid(), children=False)],
        }

    def sample(self) -> dict[str, dict[int, float]]:
        """CPU seconds by process (pid), of each side; the machine's under pid 0."""
        import psutil

        seconds = {
            name: {pid: t for meter in meters for pid, t in meter.sample().items()}
            for name, meters in self.meters.items()
        }
        times = psutil.cpu_times()
        seconds["machine"] = {0: sum(times) - times.idle - getattr(times, "iowait", 0.0)}
        return seconds


def run(pg_url: str, work: Path, count: int, repeats: int, processes: int = 1) -> list[Figure]:
    from bench import b6_postgres, b7_fleet
    from flux.client import FluxClient

    rates, statements, cpu = [], [], {name: [] for name in (*PARTS, "machine")}
    with b6_postgres.scratch_database(pg_url) as (url, note):
        print(f"B6.burst: {note}", flush=True)
        needle = url.rsplit("/", 1)[-1] if "scratch database" in note else None
        server = b7_fleet.Server(work, url, processes)
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
            meters = Meters(server.process.pid, needle, [process.pid for process, _ in fleet.processes])
            for _ in range(repeats):
                before, st0, after = meters.sample(), _statements(server.url), {}

                def drained() -> None:  # metered up to the drain: reading the runs back is not the burst's cost
                    after.update(cpu=meters.sample(), statements=_statements(server.url))

                burst = asyncio.run(b7_fleet.burst_phase(server.url, count, 120.0, drained))
                finished = [e for e in burst["executions"] if e["state"] == "COMPLETED"]
                if len(finished) > 1:
                    window = max(e["finished_at"] for e in finished) - min(e["scheduled_at"] for e in finished)
                    rates.append(len(finished) / window)
                if after:
                    for name, values in cpu.items():
                        values.append(1000 * b7_fleet.CpuMeter.used(before[name], after["cpu"][name]) / count)
                    statements.append((after["statements"] - st0) / count)
        finally:
            if fleet is not None:
                fleet.stop()
            server.stop()
    cores = os.cpu_count() or 1
    return [
        Figure.of(
            "B6.pg.burst_runs_per_s",
            rates,
            "runs/s",
            aim=">= 500 runs/s",
            check=lambda m, _p: m >= 500,
            note=f"{count} one-task runs at once on {WORKERS} synthetic workers x {SLOTS} slots, {repeats} repeats",
        ),
        *(Figure.of(f"B6.pg.burst_{name}_cpu_per_run", cpu[name], "ms CPU", note=PARTS[name]) for name in PARTS),
        Figure.of(
            "B6.pg.burst_machine_cpu_per_run",
            cpu["machine"],
            "ms CPU",
            note="all processes of the machine, submission to drain (all the above and whatever else ran)",
        ),
        Figure.of(
            "B6.pg.burst_cpu_ceiling_runs_per_s",
            [cores * 1000 / ms for ms in cpu["machine"] if ms > 0],
            "runs/s",
            note=f"{cores} cores / the machine's CPU per run: the rate were every core busy with the burst alone",
        ),
        Figure.of(
            "B6.pg.burst_statements_per_run", statements, "statements", note="flux_db_statements_total (reads + writes)"
        ),
    ]


#: Whose CPU a burst's figures show, submission to drain.
PARTS = {
    "server": "the server process",
    "postgres": "the PostgreSQL backends of the scratch database",
    "fleet": f"the {WORKERS} synthetic workers (bench.fleet_synth)",
    "client": "this process: the submitting client",
}


def counts(quick: bool) -> tuple[int, int]:
    """(runs a burst, repeats)."""
    return (200, 2) if quick else (1000, 3)


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m bench.b6_burst", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 runs, 2 repeats")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--processes", type=int, default=1, help="server processes on the one queue (flux start server --processes)"
    )
    args = parser.parse_args()
    count, repeats = counts(args.quick)
    count, repeats = args.count or count, args.repeats or repeats
    with tempfile.TemporaryDirectory(prefix="flux-b6-burst-") as work:
        print_figures(run(args.pg_url, Path(work), count, repeats, args.processes))


if __name__ == "__main__":
    main()
