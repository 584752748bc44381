"""A quota of ``executions=0`` (a namespace frozen) through a real server and worker.

Regression: with nothing held in that namespace, ``QuotaLedger.refusal`` raised KeyError
while placing its first execution, which failed every dispatch round, so no namespace's
work was placed at all. Found by tests/scheduling/test_contention_ledger_properties.py.
"""

from __future__ import annotations

import pytest
from waiting import eventually

from flux.client import FluxClient

pytestmark = pytest.mark.integration

SOURCE = """
from flux import workflow


@workflow
async def hello(ctx):
    return "hi"
"""


def test_a_namespace_with_a_quota_of_zero_executions_waits_and_others_still_run(make_cluster, workflow_file):
    cluster = make_cluster()
    admin = FluxClient(cluster.server_url)
    admin.create_namespace("frozen")
    assert admin.update_namespace("frozen", quota={"executions": 0})["quota"] == {"executions": 0}
    frozen = FluxClient(cluster.server_url, namespace="frozen")
    path = workflow_file(SOURCE)
    frozen.register_file(path)
    admin.register_file(path)
    cluster.start_worker("w1", max_concurrent_executions=2)
    waiting = frozen.run("hello")
    note = eventually(lambda: frozen.execution(waiting["id"])["placement_note"], 30, "no placement note")
    assert "held by namespace frozen's quota: executions 0/0 hold a worker" in note
    assert admin.run("hello", wait=30)["state"] == "COMPLETED"  # the default namespace is placed as ever
    assert frozen.execution(waiting["id"])["state"] == "SCHEDULED"
    admin.close()
    frozen.close()
