"""The job a worker claims carries what its placement set aside (``allotment``), in the
JSON form ``GET .../placement`` shows and ``flux.protocol.ClaimedExecution`` decodes:
the runner's ceilings and GPU pinning read it and nothing else."""

from __future__ import annotations

import pytest
from protocol import GiB, ProtocolWorker
from waiting import eventually

from flux.domain.allotment import Allotment
from flux.protocol import ClaimedExecution

pytestmark = pytest.mark.integration

SHAPED = """
    from flux import ResourceRequest, workflow

    @workflow.with_options(requests=ResourceRequest(cpu=1.5, memory="1Gi", gpu=1))
    async def shaped(ctx):
        return 1

    @workflow
    async def plain(ctx):
        return 1
"""

GPU = {
    "index": 0,
    "uuid": "GPU-0",
    "name": "Fake",
    "memory_total": 8 * GiB,
    "memory_available": 8 * GiB,
    "utilization": 0.0,
}


def test_a_claimed_job_carries_its_allotment_with_a_protocol_worker(cluster, client, workflow_file):
    client.register_file(workflow_file(SHAPED))
    worker = ProtocolWorker(cluster.server_url, cluster.home, "allotted", heartbeat_interval=5)
    try:
        worker.register(gpus=[GPU, {**GPU, "index": 1, "uuid": "GPU-1"}])
        shaped = client.run("shaped")["id"]
        job = eventually(lambda: worker.claim(wait=5)["executions"], timeout=10)[0]
        assert job["id"] == shaped
        assert job["allotment"] == {"cpu": 1.5, "memory": GiB, "gpus": [0], "devices": [{"uuid": "GPU-0", "index": 0}]}
        assert job["allotment"] == client.placement(shaped)["chosen"]["allotment"]
        assert (job["requests"], job["gpus"]) == (
            {"cpu": 1.5, "memory": GiB, "gpu": 1},
            [0],
        )  # as before, for older workers
        decoded = ClaimedExecution.model_validate(job).allotment
        assert (decoded.cpu, decoded.memory, decoded.disk, decoded.gpus) == (1.5, GiB, None, (0,))
        assert decoded == Allotment.from_json(job["allotment"]) and decoded.to_json() == job["allotment"]
        worker.complete(job, 1)

        plain = client.run("plain")["id"]
        job = eventually(lambda: worker.claim(wait=5)["executions"], timeout=10)[0]
        assert (job["id"], job["allotment"], job["gpus"]) == (plain, {}, None)
        assert not ClaimedExecution.model_validate(job).allotment
        worker.complete(job, 1)
    finally:
        worker.close()
