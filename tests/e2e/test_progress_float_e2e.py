"""A progress of 1.0 reads as the workflow reported it, on SQLite and PostgreSQL (issue 50):
SQLite once kept the JSON text ``1.0`` as the integer 1 (numeric affinity), so ``flux
workflow run --wait`` printed ``progress 1`` and a workflow returning 1.0 returned 1.
Through a real server, worker and CLI: progress 0.5 then 1.0 then the count 3, output 1.0."""

from __future__ import annotations

import json

import pytest
from shared import flux

from flux.client import FluxClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SOURCE = """
from flux import workflow


@workflow
async def halves(ctx):
    await ctx.progress(0.5)
    await ctx.progress(1.0)
    await ctx.progress(3)
    return 1.0
"""


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_progress_one_point_zero_reads_as_100_percent(database, make_cluster, workflow_file, request):
    url = request.getfixturevalue("pg_url") if database == "postgresql" else None
    cluster = make_cluster(database_url=url) if url else make_cluster()
    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(SOURCE))
    cluster.start_worker("w1")

    run = flux("workflow", "run", "halves", "--wait", "--format", "json", server_url=cluster.server_url)
    lines = [line for line in run.stderr.splitlines() if "progress" in line]
    assert lines[0].endswith("█████░░░░░ 50%"), run.stderr
    assert lines[1].endswith("██████████ 100%"), run.stderr  # not "progress 1"
    assert lines[2].endswith("progress 3"), run.stderr  # an int is a count, as reported
    execution = json.loads(run.stdout)
    assert execution["output"] == 1.0 and isinstance(execution["output"], float)  # not 1

    events = flux("execution", "events", execution["id"], "--format", "json", server_url=cluster.server_url)
    progress = [event["value"] for event in json.loads(events.stdout) if event["type"] == "PROGRESS"]
    assert progress == [0.5, 1.0, 3] and [type(value) for value in progress] == [float, float, int]
    table = flux("execution", "events", execution["id"], server_url=cluster.server_url, env={"COLUMNS": "120"})
    cells = [row.split("│")[5].strip() for row in table.stdout.splitlines() if "PROGRESS" in row]
    assert cells == ["0.5", "1.0", "3"], table.stdout  # the table for people says 1.0 too
    show = flux("execution", "show", execution["id"], "--format", "json", server_url=cluster.server_url)
    assert json.dumps(json.loads(show.stdout)["output"]) == "1.0"
