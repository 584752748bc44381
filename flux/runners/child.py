"""Entry point of a subprocess-runner child: ``python -m flux.runners.child``.

Waits (pre-warmed) for one job on stdin, runs it, writes events to the original
stdout, exits. SIGTERM cancels the workflow, which records WORKFLOW_CANCELLED.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys


def main() -> None:
    # Import the engine while idle in the warm pool, not after the job arrives.
    from flux.runners.base import execute_job
    from flux.runners.limits import Limits, apply_in_child

    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # user output (print, C extensions) goes to stderr, never into the protocol
    line = sys.stdin.readline()
    if not line:
        return  # the pool shut down before handing us a job
    job = json.loads(line)
    limits = job.get("limits") or {}
    apply_in_child(limits)
    memory_cause = Limits(**limits).describe_memory() if limits.get("memory") else None

    def emit(event: dict) -> None:
        if memory_cause and event["type"] == "WORKFLOW_FAILED" and "MemoryError" in str(event["value"].get("error")):
            event["value"]["error"] = f"{memory_cause}: {event['value']['error']}"
        protocol.write(json.dumps(event) + "\n")

    async def run() -> None:
        work = asyncio.create_task(execute_job(job, emit))
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, work.cancel)
        await work
        protocol.flush()
        # Leave now: a task thread that outlived its timeout must not hold the process
        # (asyncio.run would wait for it while shutting its executor down).
        os._exit(0)

    asyncio.run(run())


if __name__ == "__main__":
    main()
