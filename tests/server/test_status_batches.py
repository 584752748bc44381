"""Worker status in batches (issue 40): a sample that moved is held in memory, placement
reads it from there at once, and the database gets every changed sample in one batch
a second; a clean stop writes the last batch, and another replica places by what the
batch wrote (real server processes; the worker speaks the protocol from the test)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from protocol import ONE_TASK, GiB, ProtocolWorker, metric, quiet_statements, sample, statements
from waiting import eventually

from flux.client import FluxClient

NEEDS_6_GIB = ONE_TASK.replace("@workflow", '@workflow.with_options(requests={"memory": 6 * 1024**3})')


def stored_memory(cluster, name: str) -> int:
    """The worker's available memory as the database holds it (not as GET /workers shows it)."""
    with sqlite3.connect(cluster.home / "flux.db") as db:
        (available,) = db.execute(
            "SELECT r.available FROM worker_resources r JOIN workers w ON w.id = r.worker_id WHERE w.name = ?", (name,)
        ).fetchone()
    return json.loads(available)["memory"]


def client_shows(cluster, name: str) -> int:
    with FluxClient(cluster.server_url) as client:
        return client.show_worker(name)["resources"]["memory_available"]


@pytest.fixture
def busy(cluster):
    worker = ProtocolWorker(cluster.server_url, cluster.home, "busy", heartbeat_interval=5.0)
    yield worker
    worker.close()


def test_a_sample_on_every_beat_costs_a_few_statements_a_second_not_one_transaction_each_with_a_protocol_worker(
    cluster, busy
):
    busy.register(memory_available=8 * GiB)
    before = quiet_statements(cluster.server_url)  # the registration's own round and warm scan are over
    beats = 40
    for i in range(beats):  # 40 material changes in well under a second or two
        busy.heartbeat(resources=sample(memory_available=(8 if i % 2 else 2) * GiB))
    assert metric(cluster.server_url, "flux_worker_status_writes_total") == beats
    assert client_shows(cluster, "busy") == 8 * GiB  # GET /workers: what this server holds, written or not
    eventually(lambda: stored_memory(cluster, "busy") == 8 * GiB, 5, "the last sample never reached the database")
    written = statements(cluster.server_url)["write"] - before["write"]
    assert written < beats / 2, f"{written} statements for {beats} samples"


def test_placement_reads_a_sample_from_memory_before_any_batch_writes_it_with_a_protocol_worker(
    cluster, client, busy, workflow_file
):
    """A sample that frees room places waiting work within its heartbeat's round, and one that
    takes room away keeps work off the worker, whether or not a batch has written it yet."""
    busy.register(memory_available=2 * GiB)
    client.register_file(workflow_file(NEEDS_6_GIB))
    execution = client.run("one_task", 1)
    assert busy.claim(wait=1)["executions"] == []  # 2 GiB free: no room
    busy.heartbeat(resources=sample(memory_available=12 * GiB))
    job = eventually(lambda: busy.claim(wait=2)["executions"], 10, "never placed after the sample freed room")[0]
    assert job["id"] == execution["id"]
    busy.complete(job, 1)
    assert client.wait(execution["id"], 10)["state"] == "COMPLETED"

    busy.heartbeat(resources=sample(memory_available=1 * GiB))
    second = client.run("one_task", 2)
    assert busy.claim(wait=2)["executions"] == []
    assert client.execution(second["id"])["state"] == "SCHEDULED"


def test_a_clean_stop_writes_the_last_batch_with_a_protocol_worker(cluster, busy):
    busy.register(memory_available=8 * GiB)
    busy.heartbeat(resources=sample(memory_available=3 * GiB))
    cluster.stop_server()  # at once: the batch period has not come round
    assert stored_memory(cluster, "busy") == 3 * GiB


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_another_replica_places_by_the_sample_a_batch_wrote_with_a_protocol_worker(replicas, workflow_file):
    """The worker beats on replica 0, which hears its sample; replica 0 stops (its clean stop
    writes the batch) and replica 1, which never heard the sample, places by the stored one."""
    heard, other = replicas
    worker = ProtocolWorker(heard.server_url, heard.home, "moving", heartbeat_interval=1.0)
    try:
        worker.register(memory_available=2 * GiB)
        worker.heartbeat(resources=sample(memory_available=12 * GiB))
        heard.stop_server()
        with FluxClient(other.server_url) as client:
            client.register_file(workflow_file(NEEDS_6_GIB))
            execution = client.run("one_task", 1)
            worker.http.base_url = other.server_url  # its next beats and claims go to the replica left
            worker.heartbeat()

            def claimed() -> list:
                worker.heartbeat()
                return worker.claim(wait=1)["executions"]

            job = eventually(claimed, 30, "replica 1 never placed by the stored sample")[0]
            assert job["id"] == execution["id"]
    finally:
        worker.close()
