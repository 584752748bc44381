"""The engine end to end: a real server process, real worker processes, a real SQLite file."""

from __future__ import annotations

import time

import httpx
import pytest
from waiting import eventually

from flux.client import FluxClientError

STEPS = """
    import asyncio, os
    from flux import task, workflow

    @task
    async def step(n):
        return n + 1

    @task
    async def nap(seconds):
        await asyncio.sleep(seconds)
        return seconds

    @task
    async def die():
        os._exit(3)

    @workflow
    async def two_steps(ctx):
        return await step(await step(ctx.input))

    @workflow
    async def sleepy(ctx):
        return await nap(ctx.input)

    @workflow
    async def crashing(ctx):
        await step(0)
        await die()

    @workflow
    async def prints(ctx):
        print("user output must not break the protocol")
        return "fine"
"""


def wait_state(client, execution_id, states, timeout=30.0, attempt=None):
    def reached():
        execution = client.execution(execution_id)
        return execution if execution["state"] in states and attempt in (None, execution["attempt"]) else None

    return eventually(reached, timeout, f"{execution_id} never reached {states}")


@pytest.fixture
def steps(client, workflow_file):
    client.register_file(workflow_file(STEPS))
    return client


@pytest.mark.parametrize("runner", ["subprocess", "inprocess"])
def test_execution_completes_with_full_event_log(cluster, steps, runner):
    cluster.start_worker("w1", runner=runner)
    execution = steps.run("two_steps", 1, wait=30)
    assert execution["state"] == "COMPLETED" and execution["output"] == 3
    assert execution["worker_name"] == "w1" and execution["attempt"] == 1
    assert [e["type"] for e in steps.events(execution["id"])] == [
        "WORKFLOW_SCHEDULED",
        "WORKFLOW_CLAIMED",
        "ATTEMPT_STARTED",
        "WORKFLOW_STARTED",
        "TASK_STARTED",
        "TASK_COMPLETED",
        "TASK_STARTED",
        "TASK_COMPLETED",
        "ATTEMPT_ENDED",
        "WORKFLOW_COMPLETED",
    ]
    assert execution["scheduled_at"] <= execution["claimed_at"] <= execution["started_at"] <= execution["finished_at"]


def test_user_print_goes_to_stderr_not_the_event_protocol(cluster, steps):
    cluster.start_worker("w1")
    assert steps.run("prints", None, wait=30)["output"] == "fine"


def test_crashing_child_fails_only_its_execution(cluster, steps):
    """Each crash ends an attempt (docs/attempts.md); once the server's default three are
    used up the execution fails with the cause, and nothing else is touched."""
    cluster.start_worker("w1", max_concurrent_executions=2)
    sibling = steps.run("sleepy", 1.0)
    crashed = steps.run("crashing", None, wait=30)
    assert crashed["state"] == "FAILED" and crashed["attempt"] == 3
    assert crashed["error"] == "child process exited with status 3 (attempt 3; 3 of 3 attempts crashed)"
    assert steps.wait(sibling["id"], 30)["state"] == "COMPLETED"
    assert steps.run("two_steps", 0, wait=30)["state"] == "COMPLETED"  # the worker lives on


def test_cancel_running_execution(cluster, steps):
    cluster.start_worker("w1")
    execution = steps.run("sleepy", 30)
    wait_state(steps, execution["id"], {"RUNNING"})
    assert steps.cancel(execution["id"])["state"] == "CANCELLING"
    cancelled = steps.wait(execution["id"], 30)
    assert cancelled["state"] == "CANCELLED"
    types = [e["type"] for e in steps.events(execution["id"])]
    assert types[-1] == "WORKFLOW_CANCELLED" and "WORKFLOW_CANCEL_REQUESTED" in types  # task events may interleave


def test_cancel_scheduled_execution_and_cancel_twice(steps):
    execution = steps.run("two_steps", 1)  # no worker: stays SCHEDULED
    assert steps.cancel(execution["id"])["state"] == "CANCELLED"
    with pytest.raises(FluxClientError, match="409.*already CANCELLED"):
        steps.cancel(execution["id"])


def test_unknown_workflow_and_execution_are_404(steps):
    with pytest.raises(FluxClientError, match="404.*'nope' is not registered"):
        steps.run("nope", 1)
    with pytest.raises(FluxClientError, match="404.*not found"):
        steps.execution("0" * 32)


def test_registering_same_source_is_idempotent_and_new_source_is_a_new_version(steps, workflow_file):
    again = steps.register_file(workflow_file(STEPS))
    assert {w["name"]: w["version"] for w in again}["two_steps"] == 1
    changed = steps.register_file(workflow_file(STEPS + "\n    # edited\n"))
    assert {w["name"]: w["version"] for w in changed}["two_steps"] == 2


def test_malformed_payloads_get_4xx_with_reason_and_write_nothing(cluster, client):
    base = cluster.server_url
    response = httpx.post(f"{base}/workflows", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422 and "JSON" in response.text
    response = httpx.post(
        f"{base}/workflows", json={"source": "def (:", "filename": "x.py", "workflows": [{"name": "x"}]}
    )
    assert response.status_code == 422 and "syntax error" in response.json()["detail"]
    response = httpx.post(
        f"{base}/workflows", json={"source": "x = 1", "workflows": [{"name": "x", "requests": {"gpu": 1.5}}]}
    )
    assert response.status_code == 422 and "gpu" in response.json()["detail"]
    assert client.list_workflows() == []


def test_worker_auth_bootstrap_session_and_ownership(cluster, steps):
    base = cluster.server_url
    cluster.start_worker("w1", max_concurrent_executions=1)
    execution = steps.run("sleepy", 30)
    wait_state(steps, execution["id"], {"RUNNING"})

    registration = {
        "name": "intruder",
        "resources": {
            "cpu_total": 1,
            "cpu_available": 1,
            "memory_total": 1,
            "memory_available": 1,
            "disk_total": 1,
            "disk_free": 1,
        },
        "runtime": {"python_version": "3.11", "os_name": "Linux", "os_version": "x", "hostname": "h"},
    }
    wrong = httpx.post(f"{base}/workers/register", json=registration, headers={"Authorization": "Bearer wrong"})
    assert wrong.status_code == 401 and "bootstrap token" in wrong.json()["detail"]

    token = (cluster.home / "bootstrap-token").read_text().strip()
    session = httpx.post(
        f"{base}/workers/register", json=registration, headers={"Authorization": f"Bearer {token}"}
    ).json()["session_token"]
    headers = {"Authorization": f"Bearer {session}"}
    checkpoint = {"attempt": 1, "batch": 1, "events": [{"type": "WORKFLOW_COMPLETED", "value": 1, "time": time.time()}]}
    stolen = httpx.post(f"{base}/executions/{execution['id']}/checkpoint", json=checkpoint, headers=headers)
    assert stolen.status_code == 409 and "not held by worker 'intruder'" in stolen.json()["detail"]
    assert httpx.post(f"{base}/workers/w1/heartbeat", json={}, headers=headers).status_code == 403
    no_session = httpx.post(f"{base}/workers/intruder/claim", json={"wait": 0})
    assert no_session.status_code == 401
    steps.cancel(execution["id"])


def test_execution_waits_in_scheduled_until_a_worker_arrives(cluster, steps):
    execution = steps.run("two_steps", 1)
    # a round has looked for a worker for it (and explained why it waits)
    waiting = eventually(lambda: (e := steps.execution(execution["id"]))["placement_note"] and e, 30, "never weighed")
    assert waiting["state"] == "SCHEDULED"
    cluster.start_worker("late")
    assert steps.wait(execution["id"], 30)["state"] == "COMPLETED"


def test_worker_restart_requeues_what_it_held(cluster, steps):
    """A worker that restarts under the same name gives back its executions at once."""
    cluster.start_worker("w1")
    execution = steps.run("sleepy", 30)
    wait_state(steps, execution["id"], {"RUNNING"})
    cluster.kill_worker("w1")
    cluster.start_worker("w1")
    rescheduled = wait_state(steps, execution["id"], {"RUNNING"}, timeout=30, attempt=2)
    assert rescheduled["worker_name"] == "w1"
    assert "WORKFLOW_RESCHEDULED" in [e["type"] for e in steps.events(execution["id"])]
    steps.cancel(execution["id"])


def test_lost_claim_response_is_requeued_by_heartbeat_reconciliation(cluster, steps):
    """A worker that never received a delivered execution reports it missing; it is requeued."""
    base = cluster.server_url
    token = (cluster.home / "bootstrap-token").read_text().strip()
    registration = {
        "name": "forgetful",
        "heartbeat_interval": 0.1,
        "resources": {
            "cpu_total": 1,
            "cpu_available": 1,
            "memory_total": 1,
            "memory_available": 1,
            "disk_total": 1,
            "disk_free": 1,
        },
        "runtime": {"python_version": "3.11", "os_name": "Linux", "os_version": "x", "hostname": "h"},
    }
    session = httpx.post(
        f"{base}/workers/register", json=registration, headers={"Authorization": f"Bearer {token}"}
    ).json()
    headers = {"Authorization": f"Bearer {session['session_token']}"}
    execution = steps.run("two_steps", 1)
    claimed = httpx.post(f"{base}/workers/forgetful/claim", json={"wait": 10}, headers=headers, timeout=20).json()
    assert [e["id"] for e in claimed["executions"]] == [execution["id"]]  # delivered... and "lost"

    def requeued():
        httpx.post(f"{base}/workers/forgetful/heartbeat", json={"running": []}, headers=headers)
        return [e["value"]["reason"] for e in steps.events(execution["id"]) if e["type"] == "WORKFLOW_RESCHEDULED"]

    reasons = eventually(requeued, timeout=15, message="the lost execution was never requeued")
    assert reasons == ["worker forgetful does not report it running (claim lost)"]
    httpx.post(f"{base}/workers/forgetful/shutdown", headers=headers)  # it may have been offered to it again
    cluster.start_worker("honest")
    assert steps.wait(execution["id"], 30)["state"] == "COMPLETED"


def test_api_token_guards_client_calls_but_not_the_worker_protocol(tmp_path, workflow_file, monkeypatch):
    from flux.client import FluxClient
    from flux.local import LocalCluster

    with LocalCluster(tmp_path / "guarded") as cluster:
        cluster.start_server(extra_args=("--api-token", "s3cret"))
        with FluxClient(cluster.server_url) as stranger:
            with pytest.raises(FluxClientError, match="401.*API token"):
                stranger.register_file(workflow_file(STEPS))
        assert httpx.get(f"{cluster.server_url}/health").status_code == 200
        monkeypatch.setenv("FLUX_API_TOKEN", "s3cret")
        cluster.start_worker("w1")  # workers use their bootstrap and session tokens
        with FluxClient(cluster.server_url) as operator:
            operator.register_file(workflow_file(STEPS))
            assert operator.run("two_steps", 1, wait=30)["output"] == 3
