"""A failure's traceback through the real path (issue 38, finding 1): a task raises in
a worker's child; the FAILED execution and each failed try carry the type, message
and frames; ``flux execution show`` prints the user's frames at 80 columns and the
whole traceback with ``--full``."""

from __future__ import annotations

import pytest
from shared import flux

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BROKEN = """
    from flux import task, workflow

    def check(value):
        if value == "x":
            raise ValueError(f"bad input {value!r}")
        return value

    @task.with_options(retry_max_attempts=1, retry_delay=0.1)
    def boom(value):
        return check(value)

    @workflow
    async def broken(ctx):
        return await boom(ctx.input)
"""


def test_a_failed_execution_carries_its_traceback_and_show_prints_it(cluster, client, workflow_file):
    cluster.start_worker("w1")
    client.register_file(workflow_file(BROKEN, "broken_flows.py"))
    ended = client.run("broken", "x", wait=60)
    assert ended["state"] == "FAILED"

    failure = client.execution(ended["id"])["failure"]
    assert failure["type"] == "flux.model.runtime.TaskFailedError"
    root = failure["chain"][0]
    assert (root["type"], root["message"], root["leads_by"]) == ("ValueError", "bad input 'x'", "cause")
    assert [f["function"] for f in root["frames"] if f["user"]] == ["boom", "check"]
    assert any(not f["user"] for link in failure["chain"] for f in link["frames"])  # Flux's own frames, marked
    tries = [e["value"] for e in client.events(ended["id"]) if e["type"] == "TASK_FAILED"]
    assert [t["attempt"] for t in tries] == [1, 2]
    assert all(t["failure"]["type"] == "ValueError" and t["error"] == "ValueError: bad input 'x'" for t in tries)

    shown = flux("execution", "show", ended["id"][:10], server_url=cluster.server_url, env={"COLUMNS": "80"}).stdout
    assert 'broken_flows.py", line 6, in check' in shown
    assert 'raise ValueError(f"bad input {value!r}")' in shown
    assert "flux/model/runtime.py" not in shown and "--full shows them" in shown
    events = flux("execution", "events", ended["id"], server_url=cluster.server_url, env={"COLUMNS": "80"}).stdout
    assert "TASK_FAILED" in events and "Traceback" not in events  # the table leaves it to show
    full = flux("execution", "show", ended["id"], "--full", server_url=cluster.server_url).stdout
    assert "flux/model/runtime.py" in full and "ValueError: bad input 'x'" in full
