"""B16 durable waits (issue 16): how late a durable sleep wakes, and what a pause's
resume and a child's end cost the waiting execution, on a real server and worker.

    python -m bench.b16_waits            # 40 sleepers, 20 pauses, 20 calls
    python -m bench.b16_waits --quick    # 10 of each

Figures: a sleep's due time to its WAIT_COMPLETED (the server's timers tick once a
second: the aim is under 1 s) and to the next attempt's WORKFLOW_STARTED on a worker;
resume (the API call) to WORKFLOW_STARTED; a child's WORKFLOW_COMPLETED to the
parent's next WORKFLOW_STARTED; and submit to claimed for a plain run meanwhile, to
see that the timers cost dispatch nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.common import BenchCluster, Figure, print_figures, write_workflow
from flux.client import FluxClient

SOURCE = """
    from flux import call, pause, sleep, workflow

    @workflow
    async def nap(ctx):
        await sleep(ctx.input)

    @workflow
    async def ask(ctx):
        return await pause("ok")

    @workflow
    async def child(ctx):
        return ctx.input

    @workflow
    async def parent(ctx):
        return await call(child, ctx.input)

    @workflow
    async def plain(ctx):
        return 1
"""


def _first(events: list[dict], kind: str, after: float = 0.0) -> float:
    return next(e["time"] for e in events if e["type"] == kind and e["time"] >= after)


def run(count: int) -> list[Figure]:
    os.environ["FLUX_DURABLE_SLEEP_THRESHOLD"] = "1"  # the worker's children inherit it
    figures = []
    with tempfile.TemporaryDirectory(prefix="flux-b16-") as home, BenchCluster(Path(home)) as cluster:
        cluster.start_server()
        cluster.start_worker("w1", max_concurrent_executions=8)
        with FluxClient(cluster.server_url, timeout=120) as client:
            client.register_file(write_workflow(Path(home), SOURCE, "waits"))
            client.run("plain", wait=60)

            sleepers = [client.run("nap", 2 + i * 0.05)["id"] for i in range(count)]
            claims = []
            for _ in range(count):  # plain runs while the sleepers wait: dispatch as usual
                began = time.time()
                done = client.run("plain", wait=60)
                claims.append((done["claimed_at"] - began) * 1000)
            woken, started = [], []
            for eid in sleepers:
                assert client.wait(eid, 60)["state"] == "COMPLETED"
                events = client.events(eid)
                until = next(e["value"]["until"] for e in events if e["type"] == "WORKFLOW_SUSPENDED")
                woken.append((_first(events, "WAIT_COMPLETED") - until) * 1000)
                started.append((_first(events, "WORKFLOW_STARTED", until) - until) * 1000)
            figures.append(Figure.of("B16.sleep.due_to_woken_ms", woken, "ms", aim="< 1000 (a 1 s tick)"))
            figures.append(Figure.of("B16.sleep.due_to_running_ms", started, "ms"))
            figures.append(Figure.of("B16.plain.submit_to_claimed_ms", claims, "ms", note="while the sleepers wait"))

            resumed = []
            for _ in range(count):
                eid = client.run("ask")["id"]
                while client.execution(eid)["state"] != "PAUSED":
                    time.sleep(0.02)
                began = time.time()
                client.resume(eid, True)
                assert client.wait(eid, 60)["output"] is True
                resumed.append((_first(client.events(eid), "WORKFLOW_STARTED", began) - began) * 1000)
            figures.append(Figure.of("B16.pause.resume_to_running_ms", resumed, "ms"))

            handed = []
            for i in range(count):
                done = client.run("parent", i, wait=60)
                assert done["output"] == i, done
                ended = _first(client.events(done["children"][0]), "WORKFLOW_COMPLETED")
                handed.append((_first(client.events(done["id"]), "WORKFLOW_STARTED", ended) - ended) * 1000)
            figures.append(Figure.of("B16.call.child_end_to_parent_running_ms", handed, "ms"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 of each")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    print_figures(run(10 if args.quick else 40), args.json)


if __name__ == "__main__":
    main()
