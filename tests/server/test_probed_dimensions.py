"""A probed dimension beyond cpu, memory and disk travels as data: the wire's
capacity/available mappings, the worker_resources JSON columns, GET /workers, the
material-change rule and dispatch, with no field or column of its own (a real server;
the worker speaks the protocol from the test)."""

from __future__ import annotations

import httpx
import pytest
from protocol import ONE_TASK, GiB, ProtocolWorker, metric, sample
from waiting import eventually


@pytest.fixture
def worker(cluster):
    worker = ProtocolWorker(cluster.server_url, cluster.home, "scratchy", heartbeat_interval=1.0)
    yield worker
    worker.close()


def scratch(free: int) -> dict:
    return sample(capacity={"scratch": 100 * GiB}, available={"scratch": free})


def test_a_probed_dimension_is_stored_shown_and_judged_by_the_same_rule_with_a_protocol_worker(cluster, client, worker):
    worker.register(capacity={"scratch": 100 * GiB}, available={"scratch": 40 * GiB})
    shown = client.show_worker("scratchy")["resources"]
    assert (shown["capacity"], shown["available"]) == ({"scratch": 100 * GiB}, {"scratch": 40 * GiB})
    assert shown["memory_available"] == 8 * GiB and shown["disk_free"] == 50 * GiB  # the fields it always had

    worker.heartbeat(resources=scratch(40 * GiB - GiB // 2))  # under 1% of 100 GiB: immaterial
    assert client.show_worker("scratchy")["resources"]["available"] == {"scratch": 40 * GiB}
    assert metric(cluster.server_url, "flux_worker_status_writes_total") == 0
    worker.heartbeat(resources=scratch(10 * GiB))
    assert client.show_worker("scratchy")["resources"]["available"] == {"scratch": 10 * GiB}
    assert client.list_workers()[0]["resources"]["capacity"] == {"scratch": 100 * GiB}


def test_a_request_for_it_is_placed_by_what_the_worker_has_with_a_protocol_worker(
    cluster, client, worker, workflow_file
):
    """The server here has no filter of its own for scratch: it is counted as a custom resource."""
    worker.register(capacity={"scratch": 100 * GiB}, available={"scratch": 40 * GiB})
    client.register_file(
        workflow_file(
            ONE_TASK.replace("@workflow", '@workflow.with_options(requests={"resources": {"scratch": 30 * 1024**3}})')
        )
    )
    execution = client.run("one_task", 1)
    job = eventually(lambda: worker.claim(wait=2)["executions"], 10, "never claimed")[0]
    assert job["id"] == execution["id"]
    assert client.placement(execution["id"])["chosen"]["allotment"] == {"resources": {"scratch": 30 * GiB}}


def test_the_mappings_refuse_a_well_known_name_with_a_protocol_worker(cluster):
    worker = ProtocolWorker(cluster.server_url, cluster.home, "confused")
    try:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            worker.register(capacity={"memory": GiB}, available={"memory": GiB})
        assert refused.value.response.status_code == 422
        assert "not one of cpu, memory, disk, gpu" in refused.value.response.text
    finally:
        worker.close()
