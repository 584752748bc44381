"""The static verdicts placement keeps across rounds (``flux.scheduling.registered``)
are forgotten when a worker registers again with other labels: on a real server, work
that waited for a label goes to the worker as soon as it registers with it."""

from __future__ import annotations

import pytest
from protocol import ProtocolWorker
from waiting import eventually

pytestmark = pytest.mark.integration

SOURCE = """
    from flux import workflow

    @workflow.with_options(affinity={"zone": "b"})
    async def zoned(ctx):
        return ctx.input
"""


@pytest.mark.timeout(60)
def test_work_waiting_for_a_label_goes_to_a_worker_that_registers_again_with_it_with_a_protocol_worker(
    cluster, client, workflow_file
):
    client.register_file(workflow_file(SOURCE))
    worker = ProtocolWorker(cluster.server_url, cluster.home, "relabelled", heartbeat_interval=5)
    try:
        worker.register(labels={"zone": "a"})
        execution = client.run("zoned", 1)
        reason = eventually(
            lambda: client.placement(execution["id"]).get("summary"), timeout=10, message="no explanation"
        )
        assert "affinity" in str(reason)
        assert worker.claim(wait=0.5)["executions"] == []  # rounds ran and kept the verdict: zone a
        worker.register(labels={"zone": "b"})  # the same name and token, other labels
        jobs = eventually(lambda: worker.claim(wait=2)["executions"], timeout=15, message="never placed")
        assert [job["id"] for job in jobs] == [execution["id"]]
    finally:
        worker.close()
