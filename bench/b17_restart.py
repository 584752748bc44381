"""B17 restart (issue 52.5): work picked up at once after a server restart.

A real server and 4 real workers (``--max-concurrent-executions 4``); the server is
SIGKILLed, stays down ``--outage`` seconds (10; 5 with ``--quick``) while every loop of
every worker backs off, and is started again on the same port and database. At once,
``--executions`` (40; 16 quick) one-line executions are submitted. Figures, from the
events the server recorded: ``claim_to_started_s`` (WORKFLOW_CLAIMED to WORKFLOW_STARTED
of each execution: how long a placed execution waited for its worker to come and take
it; aim max <= 1 s), and ``restart_to_started_s`` (the server's start to each start).
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import time
from pathlib import Path

from bench.common import Figure, print_figures
from flux.client import FluxClient
from flux.local import LocalCluster

SOURCE = """
from flux import workflow


@workflow
async def ping(ctx):
    return ctx.input
"""
AIM_S = 1.0


def _times(client: FluxClient, execution_id: str) -> tuple[float, float]:
    events = {e["type"]: e["time"] for e in client.events(execution_id)}
    return events["WORKFLOW_CLAIMED"], events["WORKFLOW_STARTED"]


def run(workers: int, outage: float, count: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="flux-b17r-") as home, LocalCluster(Path(home)) as cluster:
        cluster.start_server()
        source = Path(home) / "ping.py"
        source.write_text(SOURCE)
        with FluxClient(cluster.server_url) as client:
            client.register_file(source)
            for n in range(workers):
                cluster.start_worker(f"w{n}", max_concurrent_executions=4)
            cluster.stop_server(signal.SIGKILL)
            time.sleep(outage)
            cluster.start_server()
            restarted = time.time()
            ids = [client.run("ping", n)["id"] for n in range(count)]
            deadline = time.monotonic() + 120
            while any(client.execution(i)["state"] != "COMPLETED" for i in ids):
                if time.monotonic() > deadline:
                    raise SystemExit("executions never completed after the restart")
                time.sleep(0.2)
            times = [_times(client, i) for i in ids]
    waited = [started - claimed for claimed, started in times]
    return [
        Figure.of(
            "B17.restart.claim_to_started_s",
            waited,
            "s",
            with_p99=True,
            aim=f"max <= {AIM_S:g} s",
            check=lambda m, h: max(waited) <= AIM_S,
            note=f"max {max(waited):.3f} s; {workers} workers, {outage:g} s outage, {count} executions",
        ),
        Figure.of(
            "B17.restart.restart_to_started_s",
            [started - restarted for _, started in times],
            "s",
            with_p99=True,
            note="from the restarted server's health to each start (re-registration included)",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 5 s outage, 16 executions")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--outage", type=float, default=None, help="seconds the server stays down [10; 5 quick]")
    parser.add_argument("--executions", type=int, default=None, help="submitted after the restart [40; 16 quick]")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    outage = args.outage if args.outage is not None else (5.0 if args.quick else 10.0)
    count = args.executions or (16 if args.quick else 40)
    print_figures(run(args.workers, outage, count), args.json)


if __name__ == "__main__":
    main()
