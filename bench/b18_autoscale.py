"""B18 autoscaling (tracker issue 35): worker pools with the ``local`` provider, from an empty fleet.

    python -m bench.b18_autoscale            # 60 executions of three shapes, idle timeout 10 s
    python -m bench.b18_autoscale --quick    # 12 executions, idle timeout 3 s

A real server (SQLite) and three pools whose templates fit one shape each: ``cpu``
(cpu=1), ``mem`` (memory=1Gi with the label tier=mem) and ``accel`` (the custom
resource accel=1). Each pool: min 0, max 3, 4 slots a worker. It prints:

- ``unfit_workers_started``: workers started while only work no pool fits (warp=1) waits (aim 0);
- ``first_start_s``: the first execution's submission -> its start, from zero workers (aim <= 3 s);
- ``makespan_s`` autoscaled, and ``static_makespan_s`` on a fresh server with a static
  fleet of the same final size started beforehand; ``added_s``, their difference (what
  starting workers on demand costs); ``makespan_ratio`` (aim <= 1.3, the full form's: the
  quick form's 12 one-second executions are too little work beside a worker's start);
- ``back_to_min_s``: the queue empty -> every pool at its minimum, no pool worker left
  (aim <= idle timeout + 10 s);
- ``lost`` and ``run_twice``: executions not COMPLETED, or started more than once (aim 0).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import Figure, print_figures, write_workflow
from flux.client import FluxClient
from flux.local import LocalCluster

SOURCE = """
    import asyncio

    from flux import ResourceRequest, task, workflow

    @task
    async def work(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @workflow.with_options(requests=ResourceRequest(cpu=1))
    async def cpu_shape(ctx):
        return await work(ctx.input)

    @workflow.with_options(requests=ResourceRequest(memory="1Gi"), affinity={"tier": "mem"})
    async def mem_shape(ctx):
        return await work(ctx.input)

    @workflow.with_options(requests=ResourceRequest(resources={"accel": 1}))
    async def accel_shape(ctx):
        return await work(ctx.input)

    @workflow.with_options(requests=ResourceRequest(resources={"warp": 1}))
    async def unfit_shape(ctx):
        return await work(ctx.input)
"""
SHAPES = ("cpu_shape", "mem_shape", "accel_shape")
WORKER_ARGS = ["--heartbeat-interval", "0.5"]
#: pool -> (labels, resources): each template fits one shape.
POOLS = {
    "cpu": ({}, {"cpu": 1}),
    "mem": ({"tier": "mem"}, {"memory": "1Gi"}),
    "accel": ({}, {"accel": 4}),
}
SLOTS, MAX = 4, 3


def pool_workers(client: FluxClient) -> list[dict]:
    return [w for w in client.list_workers() if "flux.pool" in w["labels"] and w["state"] not in ("OFFLINE",)]


def submit(client: FluxClient, count: int, seconds: float) -> tuple[list[str], float]:
    submitted = time.time()
    ids = [client.run(SHAPES[i % len(SHAPES)], seconds)["id"] for i in range(count)]
    return ids, submitted


def finish(client: FluxClient, ids: list[str], timeout: float) -> list[dict]:
    return [client.wait(execution_id, timeout) for execution_id in ids]


def autoscaled(home: Path, count: int, seconds: float, idle_timeout: float) -> tuple[list[Figure], dict[str, int]]:
    with LocalCluster(home) as cluster:
        cluster.start_server()
        with FluxClient(cluster.server_url, timeout=60) as client:
            client.register_file(write_workflow(home, SOURCE, "b18"))
            for name, (labels, resources) in POOLS.items():
                client.create_pool(
                    name,
                    "local",
                    labels=labels,
                    resources=resources,
                    slots=SLOTS,
                    min=0,
                    max=MAX,
                    idle_timeout=idle_timeout,
                    options={"worker_args": WORKER_ARGS},
                )
            # work no pool fits, alone: nothing may start
            unfit = [client.run("unfit_shape", 0.1)["id"] for _ in range(3)]
            started = set()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                started |= {w["name"] for w in pool_workers(client)}
                started |= {w["name"] for p in client.list_pools() for w in p["workers"]}
                time.sleep(0.25)
            for execution_id in unfit:
                client.cancel(execution_id)
            ids, submitted = submit(client, count, seconds)
            peak: dict[str, set[str]] = {name: set() for name in POOLS}
            while any(client.execution(i)["state"] not in ("COMPLETED", "FAILED", "CANCELLED") for i in ids[-3:]):
                for worker in pool_workers(client):
                    peak[worker["labels"]["flux.pool"]].add(worker["name"])
                time.sleep(0.25)
            done = finish(client, ids, 300)
            emptied = max(e["finished_at"] for e in done)
            back = None
            deadline = time.monotonic() + idle_timeout + 60
            while time.monotonic() < deadline:
                pools = client.list_pools()
                if all(p["starting"] + p["running"] + p["stopping"] == p["min"] for p in pools) and not pool_workers(
                    client
                ):
                    back = time.time() - emptied
                    break
                time.sleep(0.25)
    first = min(e["started_at"] for e in done) - submitted
    makespan = emptied - submitted
    lost = sum(1 for e in done if e["state"] != "COMPLETED")
    twice = sum(1 for e in done if e["attempt"] != 1)
    figures = [
        Figure.of("B18.unfit_workers_started", [len(started)], "workers", aim="0", check=lambda m, _: m == 0),
        Figure.of("B18.first_start_s", [first], "s", aim="<= 3 s", check=lambda m, _: m <= 3.0),
        Figure.of("B18.makespan_s", [makespan], "s", note=f"{count} executions of {seconds:g} s, three shapes"),
        Figure.of(
            "B18.back_to_min_s",
            [back if back is not None else float("inf")],
            "s",
            aim=f"<= idle timeout + 10 s ({idle_timeout + 10:g} s)",
            check=lambda m, _: m <= idle_timeout + 10,
        ),
        Figure.of("B18.lost", [lost], "executions", aim="0", check=lambda m, _: m == 0),
        Figure.of("B18.run_twice", [twice], "executions", aim="0", check=lambda m, _: m == 0),
    ]
    return figures, {name: len(names) for name, names in peak.items()}


def static(home: Path, count: int, seconds: float, sizes: dict[str, int]) -> float:
    """The same work on a fleet of the autoscaled run's final size, started beforehand."""
    with LocalCluster(home) as cluster:
        cluster.start_server()
        for name, (labels, resources) in POOLS.items():
            custom = [f"--resource=accel={resources['accel']}"] if "accel" in resources else []
            for n in range(max(sizes.get(name, 0), 1)):
                cluster.start_worker(
                    f"{name}-static-{n}",
                    labels=labels,
                    max_concurrent_executions=SLOTS,
                    extra_args=(*custom, *WORKER_ARGS),
                )
        with FluxClient(cluster.server_url, timeout=60) as client:
            client.register_file(write_workflow(home, SOURCE, "b18"))
            ids, submitted = submit(client, count, seconds)
            done = finish(client, ids, 300)
    return max(e["finished_at"] for e in done) - submitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="Write the figures here")
    args = parser.parse_args()
    count, seconds, idle = (12, 1.0, 3.0) if args.quick else (60, 2.0, 10.0)
    with tempfile.TemporaryDirectory(prefix="flux-b18-") as tmp:
        figures, sizes = autoscaled(Path(tmp) / "auto", count, seconds, idle)
        static_makespan = static(Path(tmp) / "static", count, seconds, sizes)
    makespan = next(f for f in figures if f.name == "B18.makespan_s").median
    ratio_note = (
        (
            "quick: 1-2 s of work against a worker's start, so the ratio is mostly that start; "
            "the aim is the full form's, added_s is the start's cost"
        )
        if args.quick
        else None
    )
    figures += [
        Figure.of("B18.static_makespan_s", [static_makespan], "s", note=f"static fleet {sizes}"),
        Figure.of("B18.added_s", [makespan - static_makespan], "s", note="what starting the fleet on demand added"),
        Figure.of(
            "B18.makespan_ratio",
            [makespan / static_makespan],
            "x",
            note=ratio_note,
            **({} if args.quick else {"aim": "<= 1.3", "check": lambda m, _: m <= 1.3}),
        ),
    ]
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
