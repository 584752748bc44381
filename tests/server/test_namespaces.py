"""The namespace API against a real server (docs/namespaces.md): the prefix and its
alias, 404 never 403 across namespaces, names and their errors, deletion, schedules
and the schema."""

from __future__ import annotations

import httpx
import pytest
from shared import SOURCE, assert_error
from waiting import eventually


def register(http: httpx.Client, namespace: str, source: str = SOURCE) -> None:
    created = http.post(f"/namespaces/{namespace}/workflows", json={"source": source, "workflows": [{"name": "x"}]})
    assert created.status_code == 201, created.text


@pytest.fixture
def http(cluster):
    with httpx.Client(base_url=cluster.server_url, timeout=10) as client:
        assert client.post("/namespaces", json={"name": "team-a"}).status_code == 201
        yield client


def test_an_execution_of_another_namespace_is_absent_never_forbidden(http):
    register(http, "team-a")
    register(http, "default")
    ours = http.post("/namespaces/team-a/workflows/x/run", json={"input": 1}).json()
    theirs = http.post("/workflows/x/run", json={"input": 2}).json()  # the alias: default's

    assert ours["namespace"] == "team-a" and theirs["namespace"] == "default"
    assert http.get(f"/namespaces/default/executions/{theirs['id']}").json()["id"] == theirs["id"]
    for path in (
        f"/namespaces/default/executions/{ours['id']}",
        f"/executions/{ours['id']}",
        f"/namespaces/team-a/executions/{theirs['id']}",
    ):
        for method, suffix in (
            ("GET", ""),
            ("GET", "/events"),
            ("GET", "/logs"),
            ("GET", "/placement"),
            ("POST", "/cancel"),
        ):
            answer = http.request(method, path + suffix)
            body = assert_error(answer, 404, "not_found")
            assert body["detail"].startswith("execution '"), (path + suffix, body)
    lists = {ns: [e["id"] for e in http.get(f"/namespaces/{ns}/executions").json()] for ns in ("default", "team-a")}
    assert lists == {"default": [theirs["id"]], "team-a": [ours["id"]]}
    assert [e["id"] for e in http.get("/executions").json()] == [theirs["id"]]
    assert http.get("/namespaces/team-a/executions", params={"id_prefix": theirs["id"][:8]}).json() == []


def test_an_unknown_namespace_is_404_with_its_name_and_a_bad_name_is_the_422_shape(http):
    for method, path in (
        ("GET", "/namespaces/nope/workflows"),
        ("POST", "/namespaces/nope/workflows/x/run"),
        ("GET", "/namespaces/nope/executions/ab12"),
        ("GET", "/namespaces/nope"),
        ("DELETE", "/namespaces/nope"),
        ("GET", "/namespaces/nope/watch/executions"),
    ):
        body = assert_error(http.request(method, path, json={"input": None}), 404, "not_found")
        assert body["detail"] == "namespace 'nope' not found", (method, path)
    for method, path, body, loc in (
        ("GET", "/namespaces/.hidden/executions", None, ["path", "namespace"]),
        ("GET", "/namespaces/a%20b/workflows", None, ["path", "namespace"]),
        ("POST", "/namespaces", {"name": ".hidden"}, ["body", "name"]),
        ("POST", "/namespaces", {"name": "a" * 129}, ["body", "name"]),
    ):
        answer = assert_error(http.request(method, path, json=body), 422, "validation_error")
        assert [error["loc"] for error in answer["errors"]] == [loc], answer
    assert_error(http.post("/namespaces", json={"name": "team-a"}), 409, "conflict")


def test_names_are_unique_within_a_namespace_only(http):
    for namespace in ("default", "team-a"):
        register(http, namespace)
        schedule = {"name": "nightly", "workflow": "x", "cron": "0 3 * * *"}
        assert http.post(f"/namespaces/{namespace}/schedules", json=schedule).status_code == 201
    assert_error(http.post("/schedules", json=schedule), 409, "conflict")
    assert [s["name"] for s in http.get("/namespaces/team-a/schedules").json()] == ["nightly"]
    assert http.delete("/namespaces/team-a/schedules/nightly").status_code == 204
    assert (
        http.get("/schedules/nightly").status_code == 200
        and http.get("/namespaces/team-a/schedules/nightly").status_code == 404
    )
    versions = http.get("/namespaces/team-a/workflows/x/versions").json()
    assert [v["version"] for v in versions] == [1]


def test_a_schedule_fires_into_its_own_namespace(http):
    register(http, "team-a")
    created = http.post("/namespaces/team-a/schedules", json={"name": "often", "workflow": "x", "every": "1s"})
    assert created.status_code == 201, created.text
    fired = eventually(
        lambda: http.get("/namespaces/team-a/executions", params={"schedule": "often"}).json(), 15, "never fired"
    )
    assert fired[0]["namespace"] == "team-a" and fired[0]["schedule"] == "often"
    assert http.get("/executions").json() == []
    trigger = http.post("/namespaces/team-a/schedules/often/trigger").json()
    assert trigger["namespace"] == "team-a"


def test_show_counts_and_delete_refuses_while_unfinished_unless_forced(http):
    register(http, "team-a")
    queued = [http.post("/namespaces/team-a/workflows/x/run", json={"input": n}).json() for n in range(3)]  # no worker
    shown = http.get("/namespaces/team-a").json()
    assert shown["state"] == "ACTIVE" and shown["workflows"] == 1 and shown["unfinished"] == 3
    assert shown["executions"] == {"SCHEDULED": 3} and shown["schedules"] == shown["secrets"] == 0

    refused = assert_error(http.delete("/namespaces/team-a"), 409, "conflict")
    assert "holds 3 unfinished execution(s)" in refused["detail"]
    assert_error(http.delete("/namespaces/default"), 409, "conflict")
    deleted = http.delete("/namespaces/team-a", params={"force": "true"}).json()
    assert deleted == {"name": "team-a", "state": "DELETED", "cancelled": 3, "unfinished": 0}
    assert http.get("/namespaces/team-a").status_code == 404
    assert_error(http.get(f"/executions/{queued[0]['id']}"), 404, "not_found")
    # made again, it is empty
    assert http.post("/namespaces", json={"name": "team-a"}).status_code == 201
    assert (
        http.get("/namespaces/team-a/workflows").json() == [] and http.get("/namespaces/team-a/executions").json() == []
    )


def test_an_empty_namespace_is_deleted_at_once_and_the_list_shows_the_rest(http):
    assert http.post("/namespaces", json={"name": "scratch"}).status_code == 201
    assert [n["name"] for n in http.get("/namespaces").json()] == ["default", "scratch", "team-a"]
    assert http.delete("/namespaces/scratch").json()["state"] == "DELETED"
    assert [n["name"] for n in http.get("/namespaces").json()] == ["default", "team-a"]


def test_a_namespace_made_on_one_replica_is_usable_on_another_and_its_deletion_seen(make_cluster, pg_url):
    """The other replica's cache reads a name it does not know at once and forgets a
    deleted one on its next read: how soon is ``NamespaceCache.MISS_TTL`` and ``TTL``
    (0.1 s, 1 s), not a figure timed here; the deadlines only catch a cache never read."""
    first, second = make_cluster(database_url=pg_url), make_cluster(database_url=pg_url)
    with httpx.Client(timeout=10) as http:
        assert http.get(f"{second.server_url}/namespaces/team-b/workflows").status_code == 404  # its cache knows none
        assert http.post(f"{first.server_url}/namespaces", json={"name": "team-b"}).status_code == 201
        eventually(
            lambda: http.get(f"{second.server_url}/namespaces/team-b/workflows").status_code == 200, 30, "never seen"
        )
        assert http.delete(f"{first.server_url}/namespaces/team-b").status_code == 200
        eventually(
            lambda: http.get(f"{second.server_url}/namespaces/team-b/workflows").status_code == 404, 30, "still seen"
        )


def test_the_schema_documents_the_prefix_and_hides_the_aliases(http):
    paths = http.get("/openapi.json").json()["paths"]
    scoped = [p for p in paths if p.startswith("/namespaces/{namespace}/")]
    assert (
        "/namespaces/{namespace}/executions/{execution_id}" in scoped
        and "/namespaces/{namespace}/workflows/{name}/run" in scoped
    )
    assert not any(p.startswith(("/workflows", "/schedules", "/secrets", "/watch")) or p == "/cache" for p in paths)
    assert "/executions" not in paths and "/executions/{execution_id}/checkpoint" in paths  # the worker's stay
    assert {"/bundles", "/cache/lookup", "/namespaces", "/namespaces/{name}"} <= set(paths)
    param = next(
        p for p in paths["/namespaces/{namespace}/executions"]["get"]["parameters"] if p["name"] == "namespace"
    )
    assert param["in"] == "path" and param["schema"]["pattern"].startswith("^[A-Za-z0-9_-]")


def test_a_cache_lookup_reads_the_namespace_of_an_execution_its_worker_holds_with_a_protocol_worker(hand_claimed):
    worker, job = hand_claimed
    key = {"key": "a" * 64}
    assert worker.post("/cache/lookup", key).json() == {"hit": False, "value": None}  # a worker before namespaces
    assert worker.post("/cache/lookup", {**key, "execution": job["id"]}).json() == {"hit": False, "value": None}
    assert_error(worker.post("/cache/lookup", {**key, "execution": "f" * 32}), 404, "not_found")
    worker.complete(job)
    body = assert_error(worker.post("/cache/lookup", {**key, "execution": job["id"]}), 409, "conflict")
    assert body["detail"] == f"execution {job['id']} is not held by worker 'by-hand'"
