"""Poison isolation: an execution that cannot be delivered fails alone, with its
reason, while the claim that carried it and every other execution go on."""

from __future__ import annotations

import json
import sqlite3

from waiting import eventually

SOURCE = """
    from flux import workflow

    @workflow
    async def echo(ctx):
        return ctx.input
"""


def nested(depth: int) -> object:
    value: object = "poison"
    for _ in range(depth):
        value = [value]
    return value


def test_one_undeliverable_execution_among_100_fails_alone(cluster, client, workflow_file):
    client.register_file(workflow_file(SOURCE))
    good = [client.run("echo", n)["id"] for n in range(100)]
    bad = client.run("echo", "will be replaced")["id"]
    # The edge refuses such input now; plant it as an older server would have stored it.
    with sqlite3.connect(cluster.home / "flux.db", timeout=30) as db:
        db.execute("UPDATE executions SET input = ? WHERE id = ?", (json.dumps(nested(300)), bad))

    cluster.start_worker("w1", max_concurrent_executions=4)

    def all_done() -> bool:
        return all(client.execution(e)["state"] == "COMPLETED" for e in good)

    eventually(all_done, 60, "the good executions did not all complete")
    assert [client.execution(e)["output"] for e in good] == list(range(100))
    failed = [e for e in client.events(bad) if e["type"] == "WORKFLOW_FAILED"]
    assert len(failed) == 1 and "cannot be delivered to a worker" in failed[0]["value"]["error"]
    with sqlite3.connect(cluster.home / "flux.db", timeout=30) as db:
        assert db.execute("SELECT state FROM executions WHERE id = ?", (bad,)).fetchone() == ("FAILED",)
    assert "Traceback" not in cluster.log("worker-w1") and "ERROR" not in cluster.log("server")
