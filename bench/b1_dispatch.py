"""B1 dispatch latency: one trivial one-task workflow at a time, SCHEDULED to STARTED.

``scheduled_at`` and ``claimed_at`` are stamped by the server (submit, dispatch round);
``started_at`` is the time of the WORKFLOW_STARTED event, stamped by the code that runs
the workflow (the subprocess child or the worker's loop) on the same host, so the three
share one clock. The claim half is the dispatcher's reaction (kick, round, commit); the
start half is the worker's long poll waking, the delivery transaction, the HTTP reply,
the runner handing the job over, the workflow loading and its first event.
"""

from __future__ import annotations

from bench.common import BenchCluster, Figure, now
from bench.workflows import TRIVIAL
from flux.client import FluxClient

WARMUP = 3


def run(cluster: BenchCluster, client: FluxClient, runner: str, count: int, prefix: str = "B1") -> list[Figure]:
    worker = f"{prefix.lower().replace('.', '-')}-{runner}"
    cluster.start_worker(worker, runner=runner, max_concurrent_executions=4, heartbeat_interval=5.0, timeout=60)
    claim, start, total, e2e, failed = [], [], [], [], 0
    try:
        for i in range(WARMUP + count):
            t0 = now()
            execution = client.run(TRIVIAL, i, wait=60)
            elapsed = now() - t0
            if execution["state"] != "COMPLETED" or execution["worker_name"] != worker:
                failed += 1
                continue
            if i < WARMUP:
                continue
            s, c, st = execution["scheduled_at"], execution["claimed_at"], execution["started_at"]
            claim.append((c - s) * 1000)
            start.append((st - c) * 1000)
            total.append((st - s) * 1000)
            e2e.append(elapsed * 1000)
    finally:
        cluster.stop_worker(worker)
    note = f"{failed} of {WARMUP + count} executions did not complete on {worker}" if failed else None
    name = f"{prefix}.{runner}"
    return [
        Figure.of(
            f"{name}.scheduled_to_started",
            total,
            "ms",
            aim="p50 < 20 ms, p95 < 50 ms",
            check=lambda m, p: m < 20 and p < 50,
            note=note,
        ),
        Figure.of(f"{name}.claim_half", claim, "ms", note="scheduled_at -> claimed_at (server dispatch round)"),
        Figure.of(
            f"{name}.start_half",
            start,
            "ms",
            note="claimed_at -> started_at (delivery, runner hand-over, workflow load)",
        ),
        Figure.of(
            f"{name}.submit_to_completed_client",
            e2e,
            "ms",
            note="client wall time: POST /run + long-poll GET until COMPLETED (context, no aim)",
        ),
    ]


async def _handover(count: int, gap: float) -> list[float]:
    """``SubprocessRunner.run`` called directly: ms from the call to the child's first event."""
    import asyncio
    import textwrap
    import time

    from bench.workflows import SOURCE
    from flux.worker.runners.base import Job, Stop
    from flux.worker.runners.subprocess import SubprocessRunner

    runner = SubprocessRunner()
    await runner.start()
    await asyncio.sleep(1.5)  # the pool's children have started and imported the engine
    source, samples = textwrap.dedent(SOURCE), []
    try:
        for i in range(count + 2):
            first: list[float] = []

            def emit(event: dict) -> None:
                if not first:
                    first.append(time.perf_counter())

            job = Job(
                id=f"h{i}",
                workflow_name=TRIVIAL,
                workflow_version=1,
                source=source,
                filename="bench_workflows.py",
                input=i,
                attempt=1,
                completed_tasks={},
            )
            t0 = time.perf_counter()
            await runner.run(job, emit, Stop())
            if i >= 2 and first:
                samples.append((first[0] - t0) * 1000)
            await asyncio.sleep(gap)
    finally:
        await runner.close()
    return samples


def _child_boot(count: int) -> tuple[list[float], list[float]]:
    """CPU ms and wall ms of one ``python -m flux.worker.runners.child`` start (imports, no job)."""
    import resource
    import subprocess
    import sys
    import time

    cpu, wall = [], []
    for _ in range(count):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "flux.worker.runners.child"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            check=True,
        )
        wall.append((time.perf_counter() - t0) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return cpu, wall


def handover(quick: bool) -> list[Figure]:
    """Diagnostic for the start half: the subprocess runner alone, no server, no HTTP."""
    import asyncio

    count = 12 if quick else 40
    boot_cpu, boot_wall = _child_boot(6 if quick else 20)
    tight = asyncio.run(_handover(count, 0.0))
    idle = asyncio.run(_handover(count // 2 if quick else count, 0.5))
    return [
        Figure.of(
            "B1.diag.subprocess_handover.back_to_back",
            tight,
            "ms",
            note="SubprocessRunner.run -> first event, jobs back to back (pool refills still booting)",
        ),
        Figure.of(
            "B1.diag.subprocess_handover.idle_pool",
            idle,
            "ms",
            note="same, 0.5 s between jobs (pool children fully started)",
        ),
        Figure.of(
            "B1.diag.child_boot_cpu",
            boot_cpu,
            "ms CPU",
            note="one subprocess-runner child starting (interpreter + engine imports), paid per execution",
        ),
        Figure.of("B1.diag.child_boot_wall", boot_wall, "ms"),
    ]
