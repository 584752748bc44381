"""Two server replicas on one PostgreSQL database never place a gang partly (docs/gangs.md):
each replica claims a gang's members in its round's own transaction, under the placement
lock, so every member of a gang's attempt is claimed in one commit or none is. Proved
from the event log over the whole run: each gang attempt's members were all claimed at
the gang's own claim time, and there is no attempt with some members only."""

from __future__ import annotations

from collections import defaultdict

import psycopg
import pytest

from flux.client import FluxClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = """
import asyncio
from flux import Gang, workflow


@workflow.with_options(gang=Gang(size=2, topology="rack"))
async def pair(ctx):
    await asyncio.sleep(0.3)
    return ctx.gang.rank
"""


def _claims(url: str) -> tuple[dict[str, list[float]], dict[str, dict[int, list[float]]]]:
    """Each gang's claim times, and each of its members' claim times by rank."""
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT x.id, x.gang_id, x.rank, e.time FROM execution_events e JOIN executions x ON x.id = e.execution_id "
            "WHERE e.type = 'WORKFLOW_CLAIMED' AND (x.gang IS NOT NULL OR x.gang_id IS NOT NULL) ORDER BY e.id"
        ).fetchall()
    gangs: dict[str, list[float]] = defaultdict(list)
    members: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for execution_id, gang_id, rank, at in rows:
        if gang_id is None:
            gangs[execution_id].append(at)
        else:
            members[gang_id][rank].append(at)
    return gangs, members


@pytest.mark.timeout(240)
def test_two_replicas_never_place_a_gang_partly(replicas, workflow_file, pg_url):
    urls = [r.server_url for r in replicas]
    for i, name in enumerate(("a1", "a2", "a3", "b1", "b2")):  # workers attached to either replica
        replicas[i % 2].start_worker(
            name,
            labels={"rack": name[0]},
            max_concurrent_executions=1,
            extra_args=("--server-url", ",".join(urls[i % 2 :] + urls[: i % 2])),
        )
    clients = [FluxClient(url) for url in urls]
    clients[0].register_file(workflow_file(SOURCE))
    runs = [(clients[i % 2], clients[i % 2].run("pair", {})["id"]) for i in range(10)]
    for client, execution_id in runs:
        done = client.wait(execution_id, 180)
        assert done["state"] == "COMPLETED" and done["output"] == 0, done
    gangs, members = _claims(pg_url)
    assert set(gangs) == {execution_id for _, execution_id in runs}
    for gang_id, claimed in gangs.items():
        by_rank = members[gang_id]
        assert sorted(by_rank) == [0, 1], (gang_id, by_rank)
        for rank, times in by_rank.items():  # every member claimed with the gang, in its transaction
            assert times == claimed, (gang_id, rank, times, claimed)
    for client in clients:
        client.close()
