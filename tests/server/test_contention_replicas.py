"""Two server replicas on one PostgreSQL database never exceed a namespace's quota or a
concurrency key's limit together (docs/contention.md): each replica places from its own
round, one at a time, reading what is held in the round's own transaction. Proved over
the whole run from the event log, not from samples of the executions table."""

from __future__ import annotations

import psycopg
import pytest

from flux.client import FluxClient

pytestmark = pytest.mark.integration

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

#: The events after which an execution no longer holds a worker (it ended, was suspended or handed back).
LETS_GO = (
    "ATTEMPT_ENDED",
    "WORKFLOW_SUSPENDED",
    "WORKFLOW_RESCHEDULED",
    "WORKFLOW_COMPLETED",
    "WORKFLOW_FAILED",
    "WORKFLOW_CANCELLED",
    "WORKFLOW_TIMED_OUT",
)


def _sql(url: str, query: str) -> list[tuple]:
    with psycopg.connect(url) as connection:
        return connection.execute(query).fetchall()


def most_held_at_once(url: str) -> dict[str, int]:
    """The most executions that held a worker at once over the whole run, by what limits
    them (``held``: the quota; each ``keyed`` execution's concurrency key), replayed from
    the event log in the order its rows were numbered.

    A round's claims are numbered after every event it saw committed (the ids are one
    sequence), so an execution this replay counts as holding was held in that round's
    own reading too: what it finds over a limit, a replica placed over it."""
    events = _sql(
        url,
        "SELECT e.execution_id, e.type, x.workflow_name, x.concurrency::text FROM execution_events e "
        "JOIN executions x ON x.id = e.execution_id "
        f"WHERE e.type IN ('WORKFLOW_CLAIMED', {', '.join(repr(t) for t in LETS_GO)}) ORDER BY e.id",
    )
    holding: dict[str, set[str]] = {}
    most: dict[str, int] = {}
    for execution_id, type_, workflow, concurrency in events:
        group = workflow if workflow == "held" else concurrency
        now = holding.setdefault(group, set())
        if type_ == "WORKFLOW_CLAIMED":
            now.add(execution_id)
        else:
            now.discard(execution_id)
        most[group] = max(most.get(group, 0), len(now))
    return most


@pytest.mark.timeout(180)
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
    runs = [(clients[i % 2], clients[i % 2].run("held", i)["id"]) for i in range(16)]
    runs += [(clients[i % 2], clients[i % 2].run("keyed", {"k": i % 2})["id"]) for i in range(12)]
    for client, execution_id in runs:
        assert client.wait(execution_id, 120)["state"] == "COMPLETED"
    most = most_held_at_once(pg_url)
    keys = sorted(k for k in most if k != "held")
    assert len(keys) == 2, most
    # the limits were reached, not merely respected by an idle fleet, and never passed in the whole run
    assert most == {"held": 2, **{k: 1 for k in keys}}, most
    for client in (admin, *clients):
        client.close()
