"""``GET /fleet`` sums the live workers' stored samples from plain rows (it and the 15 s
trend no longer read a ``WorkerInfo`` per worker): states, slots, cpu weighted by cores,
memory, GPUs and each probed dimension beyond cpu, memory and disk (a real server; the
workers speak the protocol from the test)."""

from __future__ import annotations

import httpx
from protocol import GiB, ProtocolWorker
from waiting import eventually

GPU = {
    "index": 0,
    "uuid": "GPU-a",
    "name": "H100",
    "memory_total": 80 * GiB,
    "memory_available": 60 * GiB,
    "utilization": 40.0,
}


def test_the_summary_adds_up_the_live_workers_samples_with_a_protocol_worker(cluster, client):
    workers = [ProtocolWorker(cluster.server_url, cluster.home, name) for name in ("a", "b", "gone")]
    try:
        workers[0].register(
            memory_available=6 * GiB,
            cpu_percent=50.0,
            capacity={"scratch": 100 * GiB},
            available={"scratch": 40 * GiB},
            gpus=[GPU],
        )
        workers[1].register(memory_available=16 * GiB, cpu_total=12.0, cpu_available=12.0, cpu_percent=10.0)
        workers[2].register()
        assert workers[2].post("/workers/gone/shutdown", {}).status_code == 200
        client.drain_worker("b")
        summary = eventually(lambda: httpx.get(f"{cluster.server_url}/fleet").json())
        assert summary["workers"] == {"ONLINE": 1, "DRAINED": 1, "OFFLINE": 1}
        assert (summary["slots"], summary["busy"]) == (8, 0)
        assert summary["memory_total"] == 32 * GiB and summary["memory_used"] == (16 - 6) * GiB
        assert summary["cpu_percent"] == (50.0 * 4 + 10.0 * 12) / 16
        assert (summary["gpus"], summary["gpu_percent"]) == (1, 40.0)
        assert summary["resources"] == {"scratch": [60 * GiB, 100 * GiB]}
    finally:
        for worker in workers:
            worker.close()
