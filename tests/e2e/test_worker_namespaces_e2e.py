"""Workers restricted to namespaces (``flux start worker --namespace``), through real
server and worker processes: a dedicated pool takes its namespace's executions only,
explain names the restriction, an unrestricted worker takes the rest."""

from __future__ import annotations

import httpx
from protocol import ONE_TASK, sample
from shared import assert_error, flux
from waiting import eventually

from flux.client import FluxClient

RESTRICTED = "serves namespaces ml only"


def test_a_dedicated_worker_runs_its_namespace_only_and_explain_names_why(cluster, workflow_file):
    cluster.start_worker("ml-1", extra_args=("--namespace", "ml"))
    with FluxClient(cluster.server_url) as default, FluxClient(cluster.server_url, namespace="ml") as ml:
        default.create_namespace("ml")
        for client in (default, ml):
            client.register(workflow_file(ONE_TASK, f"{client.namespace}.py"))
        ours = ml.run("one_task", 1, wait=60)
        ran_on = ml.placement(ours["id"])["chosen"]["worker"]
        waiting = default.run("one_task", 2)
        explained = eventually(lambda: (p := default.placement(waiting["id"]))["unschedulable"] and p, timeout=30)
        workers = {w["name"]: w for w in default.list_workers()}
        shown = flux("worker", "show", "ml-1", server_url=cluster.server_url).stdout
        told = flux("execution", "explain", waiting["id"], server_url=cluster.server_url).stdout
        other = cluster.start_worker("any")
        done = default.run("one_task", 3, wait=60)  # the one waiting ran too, on the new worker
        first = eventually(lambda: (e := default.execution(waiting["id"]))["state"] == "COMPLETED" and e, timeout=60)
        chosen = [default.placement(e["id"])["chosen"]["worker"] for e in (first, done)]

    assert (ours["output"], ours["namespace"]) == (1, "ml")
    assert ran_on == "ml-1"
    assert explained["state"] == "SCHEDULED"
    assert explained["summary"] == "0/1 workers are available: 1 serves other namespaces."
    assert explained["workers"] == [{"name": "ml-1", "state": "ONLINE", "available": False, "reason": RESTRICTED}]
    assert (
        explained["unschedulable"]
        == "no registered worker serves namespace 'default': all 1 serve other namespaces only"
    )
    assert workers["ml-1"]["namespaces"] == ["ml"]
    assert any("namespaces" in line and "ml" in line for line in shown.splitlines())
    assert RESTRICTED in told and "serves other namespaces" in told
    assert chosen == ["any", "any"], "never the ml worker"
    assert other.poll() is None


def test_a_restricted_worker_is_shown_and_a_pool_may_come_before_its_namespace(cluster):
    cluster.start_worker("pool", extra_args=("--namespace", "later", "--namespace", "data,later"))
    cluster.start_worker("any")
    with FluxClient(cluster.server_url) as client:
        shown = {w["name"]: w["namespaces"] for w in client.list_workers()}
    one = httpx.get(f"{cluster.server_url}/workers/pool").json()
    assert shown == {"pool": ["data", "later"], "any": None}
    assert one["namespaces"] == ["data", "later"]


def test_registration_with_a_bad_namespace_name_is_422(cluster):
    bootstrap = (cluster.home / "bootstrap-token").read_text().strip()
    body = {
        "name": "w-bad",
        "resources": sample(),
        "namespaces": ["ml", "no/slash"],
        "runtime": {"python_version": "3.11.7", "os_name": "Linux", "os_version": "6", "hostname": "h"},
    }
    reply = httpx.post(
        f"{cluster.server_url}/workers/register", json=body, headers={"Authorization": f"Bearer {bootstrap}"}
    )
    errors = assert_error(reply, 422, "validation_error")["errors"]
    assert errors[0]["loc"] == ["body", "namespaces"] and "namespace name 'no/slash'" in errors[0]["msg"]
    too_many = {**body, "namespaces": [f"ns{i}" for i in range(65)]}
    reply = httpx.post(
        f"{cluster.server_url}/workers/register", json=too_many, headers={"Authorization": f"Bearer {bootstrap}"}
    )
    assert "at most 64 namespaces" in assert_error(reply, 422, "validation_error")["errors"][0]["msg"]
