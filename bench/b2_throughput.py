"""B2 sustained throughput: many executions of short tasks in flight on one worker.

All executions are submitted concurrently (one async HTTP client, so submission does
not stretch the window), then awaited one by one (a single outstanding long poll, so
the observer adds little load). The window is server-stamped: the earliest
``scheduled_at`` to the latest ``finished_at`` of the batch.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from bench.common import BenchCluster, Figure
from bench.workflows import CHAIN
from flux.client import FluxClient

SLOTS = 50
#: Idle seconds before each measured burst (the pool's children finish booting, the server
#: settles); --quick uses less.
SETTLE = 2.0


async def _submit(server_url: str, executions: int, tasks: int) -> list[str]:
    async with httpx.AsyncClient(base_url=server_url, timeout=60) as http:
        async def one() -> str:
            response = await http.post(f"/workflows/{CHAIN}/run", json={"input": {"tasks": tasks}})
            response.raise_for_status()
            return response.json()["id"]

        return list(await asyncio.gather(*(one() for _ in range(executions))))


def _burst(cluster: BenchCluster, client: FluxClient, executions: int, tasks: int, problems: list[str]):
    """Submit a burst and wait for all of it.

    Returns (window s, tasks done, executions completed, claim ms list, start ms list).
    """
    ids = asyncio.run(_submit(cluster.server_url, executions, tasks))
    done = [client.wait(execution_id, 300) for execution_id in ids]
    completed = [e for e in done if e["state"] == "COMPLETED"]
    if len(completed) != len(done):
        problems.append(f"{len(done) - len(completed)} of {len(done)} executions did not complete")
    if not completed:
        raise RuntimeError(f"no execution of the burst completed: {done[0]}")
    tasks_done = sum(int(e["output"]) for e in completed)
    window = max(e["finished_at"] for e in completed) - min(e["scheduled_at"] for e in done)
    claims = [(e["claimed_at"] - e["scheduled_at"]) * 1000 for e in completed]
    starts = [(e["started_at"] - e["claimed_at"]) * 1000 for e in completed]
    return window, tasks_done, len(completed), claims, starts


def run(
    cluster: BenchCluster,
    client: FluxClient,
    runner: str,
    executions: int,
    tasks: int,
    repeats: int,
    prefix: str = "B2",
    settle: float = SETTLE,
) -> list[Figure]:
    worker = f"{prefix.lower().replace('.', '-')}-{runner}"
    cluster.start_worker(worker, runner=runner, max_concurrent_executions=SLOTS, heartbeat_interval=5.0, timeout=60)
    task_rates, execution_rates, windows, claim_ms, start_ms, problems = [], [], [], [], [], []
    try:
        # The first burst meets a freshly started worker (the subprocess runner has only its
        # initial warm children, so most executions pay a child start inside the window):
        # reported on its own as "cold". Every take from the pool schedules a refill, so
        # the pool afterwards holds warm_processes + (children started on demand); the measured bursts
        # that follow, each after SETTLE idle seconds, start with that many booted children.
        cold = _burst(cluster, client, executions, tasks, problems)
        for _ in range(repeats):
            time.sleep(settle)
            window, tasks_done, completed, claims, starts = _burst(cluster, client, executions, tasks, problems)
            windows.append(window)
            task_rates.append(tasks_done / window)
            execution_rates.append(completed / window)
            claim_ms += claims
            start_ms += starts
    finally:
        cluster.stop_worker(worker)
    note = f"{executions} executions x {tasks} tasks, {SLOTS} slots, {repeats} repeat(s) after {settle:g} s idle"
    if problems:
        note += "; " + "; ".join(problems)
    name = f"{prefix}.{runner}"
    return [
        Figure.of(f"{name}.tasks_per_s", task_rates, "tasks/s", aim="> 2000 tasks/s",
                  check=lambda m, p: m > 2000, note=note + " (n = repeats)"),
        Figure.of(f"{name}.executions_per_s", execution_rates, "exec/s", note="n = repeats"),
        Figure.of(f"{name}.tasks_per_s_cold", [cold[1] / cold[0]], "tasks/s",
                  note="the first burst on a freshly started worker (subprocess: only the initial warm children)"),
        Figure.of(f"{name}.window", windows, "s", note="first scheduled_at -> last finished_at"),
        Figure.of(f"{name}.claim_under_load", claim_ms, "ms", note="scheduled_at -> claimed_at of each execution in the batch"),
        Figure.of(f"{name}.start_under_load", start_ms, "ms",
                  note="claimed_at -> started_at of each execution in the batch (delivery + runner hand-over)"),
    ]
