"""B2 throughput: many executions of short tasks in flight on one worker, in the two
shapes issue 40 names.

* ``cold_20x20``: 20 executions of 20 tasks, the first burst on a freshly started
  worker (the subprocess runner has only its warm floor: most executions pay a
  child's fork inside the window). A fresh worker for each repeat.
* ``c50x20``: 50 executions of 20 tasks at once on that worker, each burst after
  ``settle`` idle seconds (the first of them grows the pool from 20 children to 50).

All executions of a burst are submitted concurrently (one async HTTP client, so
submission does not stretch the window), then awaited one by one (a single
outstanding long poll, so the observer adds little load). Two windows:

* stamped: the earliest ``scheduled_at`` to the latest ``finished_at`` (``finished_at``
  is the terminal event's own time, stamped where the workflow ran);
* durable: the client's clock from the first submission to the moment it read the
  last completion back, so every checkpoint's commit is inside it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx

from bench.common import BenchCluster, Figure
from bench.workflows import CHAIN
from flux.client import FluxClient

SLOTS = 50
#: Idle seconds before each 50 x 20 burst (the pool's children finish booting, the server
#: settles); --quick uses less.
SETTLE = 2.0
#: The shapes: (executions, tasks each).
COLD = (20, 20)
CONCURRENT = (50, 20)
#: 50 x 20 bursts after each cold one.
BURSTS = 2
AIM = 3000


async def _submit(server_url: str, executions: int, tasks: int) -> list[str]:
    async with httpx.AsyncClient(base_url=server_url, timeout=60) as http:

        async def one() -> str:
            response = await http.post(f"/workflows/{CHAIN}/run", json={"input": {"tasks": tasks}})
            response.raise_for_status()
            return response.json()["id"]

        return list(await asyncio.gather(*(one() for _ in range(executions))))


@dataclass
class Shape:
    """What the bursts of one shape measured."""

    stamped: list[float] = field(default_factory=list)
    durable: list[float] = field(default_factory=list)
    windows: list[float] = field(default_factory=list)
    claim_ms: list[float] = field(default_factory=list)
    start_ms: list[float] = field(default_factory=list)


def _burst(cluster: BenchCluster, client: FluxClient, shape: tuple[int, int], into: Shape, problems: list[str]) -> None:
    """Submit a burst, wait for all of it, and add what it measured to ``into``."""
    executions, tasks = shape
    began = time.time()
    ids = asyncio.run(_submit(cluster.server_url, executions, tasks))
    done = [client.wait(execution_id, 300) for execution_id in ids]
    read_back = time.time()
    completed = [e for e in done if e["state"] == "COMPLETED"]
    if len(completed) != len(done):
        problems.append(f"{len(done) - len(completed)} of {len(done)} executions did not complete")
    if not completed:
        raise RuntimeError(f"no execution of the burst completed: {done[0]}")
    tasks_done = sum(int(e["output"]) for e in completed)
    window = max(e["finished_at"] for e in completed) - min(e["scheduled_at"] for e in done)
    into.windows.append(window)
    into.stamped.append(tasks_done / window)
    into.durable.append(tasks_done / (read_back - began))
    into.claim_ms += [(e["claimed_at"] - e["scheduled_at"]) * 1000 for e in completed]
    into.start_ms += [(e["started_at"] - e["claimed_at"]) * 1000 for e in completed]


def run(
    cluster: BenchCluster,
    client: FluxClient,
    runner: str,
    repeats: int,
    prefix: str = "B2",
    settle: float = SETTLE,
) -> list[Figure]:
    cold, concurrent, problems = Shape(), Shape(), []
    for repeat in range(repeats):
        worker = f"{prefix.lower().replace('.', '-')}-{runner}-{repeat}"
        cluster.start_worker(worker, runner=runner, max_concurrent_executions=SLOTS, heartbeat_interval=5.0, timeout=60)
        try:
            _burst(cluster, client, COLD, cold, problems)
            for _ in range(BURSTS):
                time.sleep(settle)
                _burst(cluster, client, CONCURRENT, concurrent, problems)
        finally:
            cluster.stop_worker(worker)
    note = f"{SLOTS} slots; {repeats} fresh worker(s)" + ("; " + "; ".join(problems) if problems else "")
    name = f"{prefix}.{runner}"
    return [
        *_figures(f"{name}.cold_20x20", cold, note + ", the first burst of each"),
        *_figures(
            f"{name}.c50x20",
            concurrent,
            note + f", {BURSTS} bursts each after the cold one, {settle:g} s idle before each",
        ),
    ]


def _figures(name: str, shape: Shape, note: str) -> list[Figure]:
    return [
        Figure.of(
            f"{name}.tasks_per_s",
            shape.stamped,
            "tasks/s",
            aim=f">= {AIM} tasks/s",
            check=lambda m, p: m >= AIM,
            note=note + "; stamped window",
        ),
        Figure.of(
            f"{name}.tasks_per_s_durable",
            shape.durable,
            "tasks/s",
            note="first submission -> last completion read back by the client",
        ),
        Figure.of(f"{name}.window", shape.windows, "s", note="first scheduled_at -> last finished_at"),
        Figure.of(
            f"{name}.claim_under_load", shape.claim_ms, "ms", note="scheduled_at -> claimed_at of each execution"
        ),
        Figure.of(
            f"{name}.start_under_load",
            shape.start_ms,
            "ms",
            note="claimed_at -> started_at of each execution (delivery + runner hand-over)",
        ),
    ]
