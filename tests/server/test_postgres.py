"""PostgreSQL backend and several server replicas, against the real PostgreSQL on 127.0.0.1:5432.

Each test gets a database of its own (created and dropped here). The URL of the
server to create them on comes from FLUX_TEST_POSTGRES_URL.
"""

from __future__ import annotations

import signal
import time

import psycopg
import pytest

from flux.client import FluxClient

TRIVIAL = """
    from flux import task, workflow

    @task
    async def echo(n):
        return n

    @workflow
    async def trivial(ctx):
        return await echo(ctx.input)

    @task
    async def nap(seconds):
        import asyncio
        await asyncio.sleep(seconds)
        return seconds

    @workflow
    async def napping(ctx):
        return await nap(0.5)
"""


def _newest_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from flux.server.database import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(config).get_current_head()


def sql(url: str, query: str) -> list[tuple]:
    with psycopg.connect(url) as connection:
        return connection.execute(query).fetchall()


def test_engine_end_to_end_on_postgres(make_cluster, workflow_file, pg_url):
    cluster = make_cluster(database_url=pg_url)
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(TRIVIAL))
        cluster.start_worker("pg-worker")
        execution = client.run("trivial", 7, wait=30)
        assert (execution["state"], execution["output"]) == ("COMPLETED", 7)
        assert [e["type"] for e in client.events(execution["id"])][-1] == "WORKFLOW_COMPLETED"
    assert sql(pg_url, "SELECT version_num FROM alembic_version") == [(_newest_revision(),)]


def _start_workers(servers, count=2):
    urls = [s.server_url for s in servers]
    for i in range(count):
        primary = servers[i % len(servers)]
        ordered = ",".join(urls[i % len(urls) :] + urls[: i % len(urls)])  # attached to a different replica each
        primary.start_worker(
            f"w{i}",
            max_concurrent_executions=20,
            runner="inprocess",
            heartbeat_interval=0.5,
            extra_args=("--server-url", ordered),
        )


def _submit(servers, workflow_file, n, workflow="trivial"):
    clients = [FluxClient(s.server_url) for s in servers]
    clients[0].register_file(workflow_file(TRIVIAL))
    ids = [clients[i % 2].run(workflow, i)["id"] for i in range(n)]
    return clients, ids


def _wait_all_completed(url, n, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = sql(url, "SELECT count(*) FROM executions WHERE state = 'COMPLETED'")[0][0]
        if done == n:
            return
        time.sleep(0.5)
    states = sql(url, "SELECT state, count(*) FROM executions GROUP BY state")
    raise AssertionError(f"not all {n} completed: {states}")


@pytest.mark.timeout(300)
@pytest.mark.slow  # over ~20 s: CI's second step
def test_two_replicas_500_executions_each_completes_exactly_once(replicas, workflow_file, pg_url):
    _start_workers(replicas)
    clients, ids = _submit(replicas, workflow_file, 500)
    _wait_all_completed(pg_url, 500, timeout=240)
    started = sql(
        pg_url, "SELECT execution_id, count(*) FROM execution_events WHERE type = 'WORKFLOW_STARTED' GROUP BY 1"
    )
    assert len(started) == 500 and {count for _, count in started} == {1}
    outputs = dict(sql(pg_url, "SELECT id, output::text FROM executions"))
    assert all(outputs[i] == str(n) for n, i in enumerate(ids))
    for client in clients:
        client.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_replica_killed_mid_run_the_rest_finish_on_the_other(replicas, workflow_file, pg_url):
    _start_workers(replicas)
    clients, ids = _submit(replicas, workflow_file, 200, workflow="napping")
    replicas[0].stop_server(signal.SIGKILL)
    in_flight = sql(pg_url, "SELECT count(*) FROM executions WHERE state <> 'COMPLETED'")[0][0]
    assert in_flight > 0, "the replica died after all the work was done: nothing was tested"
    _wait_all_completed(pg_url, 200, timeout=240)
    assert "switching to server" in replicas[0].log("worker-w0")  # w0 was attached to the dead replica
    completed = sql(
        pg_url, "SELECT execution_id, count(*) FROM execution_events WHERE type = 'WORKFLOW_COMPLETED' GROUP BY 1"
    )
    assert len(completed) == 200 and {count for _, count in completed} == {1}
    for client in clients:
        client.close()
