"""B1's checkpoints one kind at a time: the server's CPU for each checkpoint a run sends.

A protocol-speaking worker (plain HTTP, no runner) registers with ``--count`` slots;
``--count`` runs are submitted and claimed, then every run gets, one request after
another, its opening checkpoint (WORKFLOW_STARTED), a plain one (TASK_STARTED) and its
closing one (WORKFLOW_COMPLETED), and as many ``GET /health`` (the HTTP stack's
floor) go before them. The figure of each kind is the server process's CPU
over those requests / ``--count``, one per repeat: what one such request costs the
server end to end (HTTP, validation, the writer's transaction), without the noise of a
whole execution's path (docs/latency.md, "What two cores allow").

    python -m bench.b1_checkpoints [--count 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from bench.common import BenchCluster, Figure, print_figures
from flux.worker import probe

WORKFLOW = "from flux import workflow\n\n@workflow\nasync def hello(ctx):\n    return ctx.input\n"
#: Each kind's batch number and event, in the order a run sends them.
KINDS = {
    "opening": (1, {"type": "WORKFLOW_STARTED", "name": "hello"}),
    "plain": (2, {"type": "TASK_STARTED", "name": "step", "task_id": "step_1"}),
    "closing": (3, {"type": "WORKFLOW_COMPLETED", "name": "hello", "value": {"ok": True}}),
}


def run(home: Path, count: int, repeats: int) -> list[Figure]:
    cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
    floor: list[float] = []
    with BenchCluster(home) as cluster:
        cluster.start_server()
        server = psutil.Process(cluster.server.pid)
        bootstrap = (cluster.home / "bootstrap-token").read_text().strip()
        with httpx.Client(base_url=cluster.server_url, timeout=30) as http:
            worker = {
                "name": "bench",
                "heartbeat_interval": 3600.0,
                **probe.get_resources_info({}, count, gpu_source="none"),
            }
            token = http.post(
                "/workers/register", json=worker, headers={"Authorization": f"Bearer {bootstrap}"}
            ).json()["session_token"]
            auth = {"Authorization": f"Bearer {token}"}
            http.post("/workflows", json={"source": WORKFLOW, "workflows": [{"name": "hello"}]}).raise_for_status()
            for _ in range(repeats):
                ids = [http.post("/workflows/hello/run", json={"input": i}).json()["id"] for i in range(count)]
                claimed = 0
                while claimed < count:
                    claimed += len(
                        http.post("/workers/bench/claim", json={"wait": 5}, headers=auth).json()["executions"]
                    )
                time.sleep(0.2)
                before = sum(server.cpu_times()[:2])
                for _ in ids:
                    http.get("/health").raise_for_status()
                floor.append((sum(server.cpu_times()[:2]) - before) * 1000 / count)
                for kind, (batch, event) in KINDS.items():
                    time.sleep(0.2)  # what the claims left behind settles first
                    before = sum(server.cpu_times()[:2])
                    for execution_id in ids:
                        body = {"attempt": 1, "batch": batch, "events": [dict(event, time=time.time())]}
                        http.post(f"/executions/{execution_id}/checkpoint", json=body, headers=auth).raise_for_status()
                    cpu[kind].append((sum(server.cpu_times()[:2]) - before) * 1000 / count)
    return [
        Figure.of("B1.checkpoint.health_server_cpu", floor, "ms CPU", note="GET /health: the HTTP stack's floor"),
        *(
            Figure.of(
                f"B1.checkpoint.{kind}_server_cpu",
                values,
                "ms CPU",
                note=f"{KINDS[kind][1]['type']}, one batch of one event, {count} runs",
            )
            for kind, values in cpu.items()
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.b1_checkpoints", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="runs (and requests of each kind) per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flux-b1-checkpoints-") as work:
        print_figures(run(Path(work) / "home", args.count, args.repeats))


if __name__ == "__main__":
    main()
