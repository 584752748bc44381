"""Two server replicas on one PostgreSQL database never exceed a namespace's quota or a
concurrency key's limit together (docs/contention.md): each replica places from its own
round, one at a time, reading what is held in the round's own transaction."""

from __future__ import annotations

import time

import psycopg
import pytest

from flux.client import FluxClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = """
import asyncio
from flux import Concurrency, ResourceRequest, workflow


@workflow.with_options(requests=ResourceRequest(resources={"accel": 1}))
async def held(ctx):
    await asyncio.sleep(0.3)
    return ctx.input


@workflow.with_options(concurrency=Concurrency(key="k:{input.k}", limit=1))
async def keyed(ctx):
    await asyncio.sleep(0.2)
    return ctx.input
"""

HOLDING = "('CLAIMED', 'RUNNING', 'CANCELLING')"


def _sql(url: str, query: str) -> list[tuple]:
    with psycopg.connect(url) as connection:
        return connection.execute(query).fetchall()


@pytest.mark.timeout(240)
def test_two_replicas_never_exceed_a_quota_or_a_concurrency_limit_together(replicas, workflow_file, pg_url):
    urls = [r.server_url for r in replicas]
    for i, replica in enumerate(replicas):  # each worker attached to a different replica
        replica.start_worker(
            f"w{i}",
            max_concurrent_executions=6,
            runner="inprocess",
            heartbeat_interval=0.5,
            extra_args=(
                "--server-url",
                ",".join(urls[i:] + urls[:i]),
                "--resource",
                "accel=4",
                "--allocation",
                "reserve",
            ),
        )
    admin = FluxClient(urls[0])
    admin.create_namespace("ml")
    admin.update_namespace("ml", quota={"resources.accel": 2})
    clients = [FluxClient(url, namespace="ml") for url in urls]
    clients[0].register_file(workflow_file(SOURCE))
    ids = [clients[i % 2].run("held", i)["id"] for i in range(16)]
    ids += [clients[i % 2].run("keyed", {"k": i % 2})["id"] for i in range(12)]
    most_held = most_keyed = 0
    deadline = time.monotonic() + 180
    while True:
        held = _sql(pg_url, f"SELECT count(*) FROM executions WHERE workflow_name = 'held' AND state IN {HOLDING}")[0][
            0
        ]
        keyed = _sql(
            pg_url,
            f"SELECT concurrency::text, count(*) FROM executions WHERE workflow_name = 'keyed' "
            f"AND state IN {HOLDING} GROUP BY 1",
        )
        most_held = max(most_held, held)
        most_keyed = max([most_keyed, *(count for _, count in keyed)])
        assert held <= 2 and all(count <= 1 for _, count in keyed), (held, keyed)
        done = _sql(pg_url, "SELECT count(*) FROM executions WHERE state = 'COMPLETED'")[0][0]
        if done == len(ids):
            break
        assert time.monotonic() < deadline, _sql(pg_url, "SELECT state, count(*) FROM executions GROUP BY 1")
        time.sleep(0.02)
    assert most_held == 2 and most_keyed == 1  # the limits were reached, not merely respected by an idle fleet
    for client in (admin, *clients):
        client.close()
