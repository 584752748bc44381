"""Fair share end to end (docs/contention.md, "Fair share"): two namespaces of weights
3 and 1 share a contended fleet through a real server and a real worker process.

The shares are read from the order of the starts the server recorded (each
execution's WORKFLOW_CLAIMED event), never from how long anything took."""

from __future__ import annotations

import pytest

from flux.client import FluxClient

pytestmark = pytest.mark.integration

SOURCE = """
import asyncio

from flux import workflow


@workflow
async def short(ctx):
    await asyncio.sleep(0.2)
    return ctx.input
"""

WEIGHTS = {"heavy": 3.0, "light": 1.0}
#: Executions each namespace submits: three times what the fleet's 4 slots hold at once.
EACH = 12
TOLERANCE = 0.15


def claimed_at(client: FluxClient, execution_id: str) -> float:
    """When the server placed it: its first claim's time, one per dispatch round (rounds run one at a time)."""
    return next(e["time"] for e in client.events(execution_id) if e["type"] == "WORKFLOW_CLAIMED")


def test_two_weighted_namespaces_share_a_contended_fleet_by_their_weights(cluster, workflow_file):
    admin = FluxClient(cluster.server_url)
    clients = {}
    for namespace, weight in WEIGHTS.items():
        admin.create_namespace(namespace)
        admin.update_namespace(namespace, weight=weight)
        clients[namespace] = FluxClient(cluster.server_url, namespace=namespace)
        clients[namespace].register_file(workflow_file(SOURCE))
    # submitted alternately (first come, first served alone would start them 1:1), and all waiting before the
    # one 4-slot worker registers: both namespaces are contended from the first round
    runs = [(ns, clients[ns].run("short", i)["id"]) for i in range(EACH) for ns in WEIGHTS]
    cluster.start_worker("w", max_concurrent_executions=4, runner="inprocess")
    for namespace, execution_id in runs:
        assert clients[namespace].wait(execution_id, 60)["state"] == "COMPLETED"

    starts = sorted(((claimed_at(clients[ns], execution_id), ns) for ns, execution_id in runs), key=lambda s: s[0])
    order = [ns for _, ns in starts]
    # while both had work waiting: up to the round that started the last of the first namespace to run out
    ran_out = min(WEIGHTS, key=lambda ns: max(i for i, each in enumerate(order) if each == ns))
    last_round = max(at for at, ns in starts if ns == ran_out)
    contended = [ns for at, ns in starts if at <= last_round]
    for namespace, weight in WEIGHTS.items():
        share = contended.count(namespace) / len(contended)
        expected = weight / sum(WEIGHTS.values())
        assert abs(share - expected) <= TOLERANCE, (namespace, share, expected, order)
    assert ran_out == "heavy", order  # the heavier weight went through its backlog first
    for each in (admin, *clients.values()):
        each.close()
