"""Request bodies are strictly typed: ``true``, ``"4"`` or ``2.0`` where an integer
belongs (or ``true``/``"4"`` where a number does) are refused, not coerced."""

from __future__ import annotations

import copy
import time

import httpx
import pytest

from flux.worker import probe

SOURCE = "from flux import workflow\n\n@workflow\nasync def x(ctx):\n    return 1\n"


def registration(name: str = "raw") -> dict:
    return {"name": name, "heartbeat_interval": 5, **probe.get_resources_info({}, 1, gpu_source="none")}


def with_value(payload: dict, path: tuple, value: object) -> dict:
    payload = copy.deepcopy(payload)
    target = payload
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return payload


@pytest.fixture
def http(cluster):
    token = (cluster.home / "bootstrap-token").read_text().strip()
    with httpx.Client(base_url=cluster.server_url, timeout=10, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


def assert_refused(response: httpx.Response, loc: list) -> None:
    assert response.status_code == 422, response.text
    assert [e["loc"] for e in response.json()["errors"]] == [loc]


def test_workflow_calls_refuse_coerced_values(http):
    del http.headers["Authorization"]  # an open server's client calls carry no token (the bootstrap token is refused)
    for value in (True, "1"):
        body = {"source": SOURCE, "workflows": [{"name": "x", "pending_timeout": value}]}
        assert_refused(http.post("/workflows", json=body), ["body", "workflows", 0, "pending_timeout"])
    assert (
        http.post(
            "/workflows", json={"source": SOURCE, "workflows": [{"name": "x", "pending_timeout": 60}]}
        ).status_code
        == 201
    )
    for value in (True, "1", 1.0):
        assert_refused(http.post("/workflows/x/run", json={"version": value}), ["body", "version"])
    assert http.post("/workflows/x/run", json={"version": 1}).status_code == 201


def test_worker_calls_refuse_coerced_values(http):
    good = registration()
    for path, value in (
        (("max_concurrent_executions",), True),
        (("max_concurrent_executions",), "4"),
        (("max_concurrent_executions",), 4.0),
        (("heartbeat_interval",), True),
        (("resources", "cpu_total"), "4"),
        (("resources", "memory_total"), 2.0),
        (("custom_resources", "fpga"), True),
        (("metrics", "load"), "0.5"),
    ):
        assert_refused(http.post("/workers/register", json=with_value(good, path, value)), ["body", *path])
    session = http.post("/workers/register", json=good).json()["session_token"]
    auth = {"Authorization": f"Bearer {session}"}
    assert_refused(http.post("/workers/raw/claim", json={"wait": "0"}, headers=auth), ["body", "wait"])
    assert http.post("/workers/raw/claim", json={"wait": 0}, headers=auth).status_code == 200
    event = {"type": "TASK_STARTED", "time": time.time()}
    assert_refused(
        http.post("/executions/e/checkpoint", json={"attempt": True, "batch": 1, "events": [event]}, headers=auth),
        ["body", "attempt"],
    )
    stringly_timed = {"attempt": 1, "batch": 1, "events": [{**event, "time": "now"}]}
    assert_refused(
        http.post("/executions/e/checkpoint", json=stringly_timed, headers=auth), ["body", "events", 0, "time"]
    )
