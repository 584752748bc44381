"""Explain leads with room held for a higher priority (issue 50), through a real server,
a one-slot worker and the CLI: a low-priority run that waits while the worker's only slot
is held for a high-priority run says so on its first line, naming the worker and the run
it is held for (``priority room``), before the workers' tally."""

from __future__ import annotations

import json

import pytest
from shared import flux
from waiting import eventually

from flux.client import FluxClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

WAIT = 90.0
WIDE = {"COLUMNS": "240"}  # the summary on one line, as a wide terminal shows it
SOURCE = """
import asyncio

from flux import workflow


@workflow.with_options(priority="low", preemptible=False)
async def steady(ctx):
    await asyncio.sleep(ctx.input)


@workflow.with_options(priority="high")
async def urgent(ctx):
    return "urgent"


@workflow.with_options(priority="low")
async def later(ctx):
    return "later"
"""


def test_a_low_priority_run_kept_off_a_held_room_explains_with_the_room_first(make_cluster, workflow_file):
    cluster = make_cluster()
    client = FluxClient(cluster.server_url)
    client.register_file(workflow_file(SOURCE))
    cluster.start_worker("w1", max_concurrent_executions=1)
    running = client.run("steady", 60)["id"]
    eventually(lambda: client.execution(running)["state"] == "RUNNING", WAIT, "the steady run never ran")
    urgent = client.run("urgent")["id"]
    eventually(
        lambda: "room is held for it on worker w1" in (client.execution(urgent)["placement_note"] or ""),
        WAIT,
        "no room was held for the urgent run",
    )
    later = client.run("later")["id"]
    eventually(lambda: client.execution(later)["placement_note"], WAIT, "no round said why it waits")

    placement = client.placement(later)  # the API: the held room leads, the workers' tally follows
    priorities = {e: client.execution(e)["priority"] for e in (urgent, later)}
    room = (
        f"room on worker w1 is held for higher-priority {urgent} (priority {priorities[urgent]}; "
        f"this one's {priorities[later]}): lower-priority work may not take it"
    )
    assert placement["binding"] == {"kind": "priority room", "message": room}
    assert placement["summary"].startswith(f"{room}; 0/1 workers are available"), placement["summary"]
    assert client.execution(later)["placement_note"] == placement["summary"]  # the round's note: the same truth
    shown = flux("execution", "explain", later, server_url=cluster.server_url, env=WIDE).stdout
    assert shown.splitlines()[0] == placement["summary"], shown  # the CLI's first line
    as_json = json.loads(flux("execution", "explain", later, "--format", "json", server_url=cluster.server_url).stdout)
    assert as_json["binding"]["kind"] == "priority room"

    client.cancel(running)  # the slot frees: the urgent run takes its room, then the later one runs
    assert client.wait(urgent, WAIT)["state"] == "COMPLETED"
    assert client.wait(later, WAIT)["state"] == "COMPLETED"
    client.close()
