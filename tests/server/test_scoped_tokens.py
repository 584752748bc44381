"""Each token does one job (issue 12): the bootstrap token only registers, a worker's
session token acts only for that worker and its own executions, and the API token
(clients) cannot speak for a worker. Real server process with an API token set."""

from __future__ import annotations

import time

import httpx
import pytest
from protocol import ONE_TASK, ProtocolWorker

API_TOKEN = "client-secret-token"


@pytest.fixture
def guarded(make_cluster, monkeypatch, workflow_file):
    monkeypatch.setenv("FLUX_API_TOKEN", API_TOKEN)  # the server requires it, the client sends it
    cluster = make_cluster()
    worker = ProtocolWorker(cluster.server_url, cluster.home, "w1", heartbeat_interval=5)
    worker.register()
    from flux.client import FluxClient

    with FluxClient(cluster.server_url) as client:
        client.register_file(workflow_file(ONE_TASK))
        yield cluster, worker, client
    worker.close()


def call(cluster, method: str, path: str, token: str, json=None) -> int:
    return httpx.request(
        method, f"{cluster.server_url}{path}", json=json, headers={"Authorization": f"Bearer {token}"}
    ).status_code


def test_the_bootstrap_token_only_registers_with_a_protocol_worker(guarded):
    cluster, worker, _ = guarded
    bootstrap = worker.bootstrap
    assert call(cluster, "POST", "/workers/w1/heartbeat", bootstrap, {"running": []}) == 401
    assert call(cluster, "POST", "/workers/w1/claim", bootstrap, {"wait": 0}) == 401
    assert call(cluster, "GET", "/executions", bootstrap) == 401
    assert call(cluster, "POST", "/workflows/one_task/run", bootstrap, {"input": 1}) == 401


def test_a_session_token_acts_only_for_its_own_worker_and_executions_with_a_protocol_worker(guarded):
    cluster, worker, client = guarded
    other = ProtocolWorker(cluster.server_url, cluster.home, "w2", heartbeat_interval=5)
    try:
        other.register()
        assert call(cluster, "POST", "/workers/w2/heartbeat", worker.token, {"running": []}) == 403
        assert call(cluster, "POST", "/workers/w2/claim", worker.token, {"wait": 0}) == 403
        assert call(cluster, "GET", "/executions", worker.token) == 401  # not a client
        execution = client.run("one_task", 1)
        job = None
        for _ in range(50):
            job = (worker.claim(wait=1)["executions"] or [None])[0] or (other.claim(wait=1)["executions"] or [None])[0]
            if job:
                break
        holder, stranger = (
            (worker, other) if client.execution(execution["id"])["worker_name"] == "w1" else (other, worker)
        )
        events = {"attempt": job["attempt"], "batch": 1, "events": [{"type": "WORKFLOW_STARTED", "time": time.time()}]}
        assert stranger.post(f"/executions/{job['id']}/checkpoint", events).status_code == 409
        assert holder.post(f"/executions/{job['id']}/checkpoint", events).status_code == 200
    finally:
        other.close()


def test_the_api_token_cannot_speak_for_a_worker_with_a_protocol_worker(guarded):
    cluster, worker, client = guarded
    assert call(cluster, "POST", "/workers/w1/heartbeat", API_TOKEN, {"running": []}) == 401
    assert call(cluster, "POST", "/workers/w1/claim", API_TOKEN, {"wait": 0}) == 401
    execution = client.run("one_task", 1)
    events = {"attempt": 1, "batch": 1, "events": [{"type": "WORKFLOW_COMPLETED", "value": 1, "time": time.time()}]}
    assert call(cluster, "POST", f"/executions/{execution['id']}/checkpoint", API_TOKEN, events) == 401
    assert call(cluster, "GET", "/executions", API_TOKEN) == 200
