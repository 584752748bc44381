"""The server's pooled PostgreSQL connections closed under it (a database restart, a
failover, an idle timeout): the next requests still succeed, with real processes."""

from __future__ import annotations

import psycopg
from conftest import POSTGRES_URL
from protocol import ONE_TASK

from flux.client import FluxClient
from flux.local import LocalCluster


def terminate_backends(database: str) -> int:
    """What a database restart does to the server's connections: every one is closed."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return len(rows)


def test_requests_after_the_database_closed_every_pooled_connection_succeed(tmp_path, pg_url, workflow_file):
    cluster = LocalCluster(tmp_path / "home", database_url=pg_url)
    try:
        cluster.start_server()
        cluster.start_worker("w1", runner="inprocess")
        with FluxClient(cluster.server_url) as client:
            client.register_file(workflow_file(ONE_TASK))
            warm = [client.run("one_task", n) for n in range(8)]  # several pooled connections in use
            assert {client.wait(e["id"], 30)["state"] for e in warm} == {"COMPLETED"}

            assert terminate_backends(pg_url.rsplit("/", 1)[1]) > 0
            after = [client.run("one_task", n) for n in range(8)]  # each would meet a dead connection
            done = [client.wait(e["id"], 30) for e in after]
            assert [e["state"] for e in done] == ["COMPLETED"] * 8
            assert [e["output"] for e in done] == list(range(8))
            assert len(client.list_executions()) >= 16
        log = cluster.log("server")
        assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    finally:
        cluster.close()
