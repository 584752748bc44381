"""A quota's numbers come back as given (issue 50): ``gpu=8`` answers 8, not 8.0, and
``cpu=1.5`` answers 1.5, in every answer that carries a quota or what is held (PATCH, PUT,
GET /namespaces/NAME, the namespace list, an execution's placement) and in the CLI's JSON;
as the rest of the API keeps numbers (``flux.protocol.base.Number``). A real server, worker
and CLI; the types are checked, since 8 == 8.0 in Python."""

from __future__ import annotations

import json

import httpx
import pytest
from shared import flux
from waiting import eventually

from flux.client import FluxClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WAIT = 60.0
QUOTA = {"gpu": 8, "cpu": 1.5, "memory": 4 * 1024**3, "executions": 1}
SOURCE = """
import asyncio

from flux import ResourceRequest, workflow


@workflow.with_options(requests=ResourceRequest(cpu=1))
async def nap(ctx):
    await asyncio.sleep(ctx.input)
"""


def as_given(numbers: dict, expected: dict) -> None:
    """Equal, and of the same type key by key (8 is an int, 1.5 a float)."""
    assert numbers == expected and {k: type(v) for k, v in numbers.items()} == {
        k: type(v) for k, v in expected.items()
    }, numbers


def test_quota_and_held_numbers_come_back_as_given(make_cluster, workflow_file):
    cluster = make_cluster()
    url = cluster.server_url
    flux("namespace", "create", "ml", server_url=url)
    set_ = flux(
        "namespace", "quota", "ml", "gpu=8", "cpu=1.5", "memory=4Gi", "executions=1", "--format", "json", server_url=url
    )
    as_given(json.loads(set_.stdout)["quota"], QUOTA)
    as_given(httpx.patch(f"{url}/namespaces/ml", json={"quota": {"gpu": 8}}).json()["quota"], QUOTA)
    as_given(httpx.put(f"{url}/namespaces/ml/quota", json={"quota": {**QUOTA, "memory": "4Gi"}}).json()["quota"], QUOTA)
    as_given(httpx.get(f"{url}/namespaces/ml").json()["quota"], QUOTA)
    as_given(next(n for n in httpx.get(f"{url}/namespaces").json() if n["name"] == "ml")["quota"], QUOTA)
    shown = json.loads(flux("namespace", "show", "ml", "--format", "json", server_url=url).stdout)
    as_given(shown["quota"], QUOTA)
    assert '"gpu": 8,' in flux("namespace", "show", "ml", "--format", "json", server_url=url).stdout  # not 8.0

    client = FluxClient(url, namespace="ml")
    client.register_file(workflow_file(SOURCE))
    cluster.start_worker("w1", max_concurrent_executions=2)
    holding = client.run("nap", 60)["id"]
    eventually(lambda: client.execution(holding)["state"] == "RUNNING", WAIT, "the first run never ran")
    held = client.run("nap", 0)["id"]  # executions=1: the quota holds it
    eventually(lambda: client.execution(held)["placement_note"], WAIT, "no round said why it waits")
    as_given(httpx.get(f"{url}/namespaces/ml").json()["held"], {"cpu": 1, "executions": 1})
    queue = json.loads(flux("execution", "explain", held, "-n", "ml", "--format", "json", server_url=url).stdout)[
        "queue"
    ]
    as_given(queue["quota"], QUOTA)
    as_given(queue["held"], {"cpu": 1, "executions": 1})
    client.cancel(holding)
    client.close()
