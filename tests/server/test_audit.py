"""The audit log (issue 33): every mutating client call, allowed or refused (at the edge
too), is one row naming its token (never the secret), role, namespace, action, path,
status and client; reads and the worker protocol are not recorded; rows are read in
keyset pages, filtered, seen by namespace, never changed through the API, and pruned
only by the server's own retention. No token is in a log, an argv or an event. Real
server and worker processes."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from shared import HELLO, flux
from waiting import eventually

ADMIN_TOKEN = "audit-test-admin-token-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SOURCE = {
    "source": "from flux import workflow\n\n@workflow\nasync def hello(ctx):\n    return 1\n",
    "workflows": [{"name": "hello"}],
}


def bearer(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


@pytest.fixture
def guarded(make_cluster, monkeypatch):
    monkeypatch.setenv("FLUX_API_TOKEN", ADMIN_TOKEN)  # the server's, from its environment (not its argv)
    cluster = make_cluster()
    made = httpx.post(f"{cluster.server_url}/namespaces", json={"name": "other"}, headers=ADMIN, timeout=30)
    assert made.status_code == 201, made.text  # a failure here says why (it once surfaced as a KeyError below)
    tokens = {}
    for name, role, namespaces in (
        ("dev", "developer", None),
        ("view", "viewer", None),
        ("ops-other", "operator", ["other"]),
        ("dev-other", "developer", ["other"]),
    ):
        body = {"name": name, "role": role, "namespaces": namespaces}
        response = httpx.post(f"{cluster.server_url}/tokens", json=body, headers=ADMIN, timeout=30)
        assert response.status_code == 201, response.text
        tokens[name] = response.json()["token"]
    return cluster, tokens


def audit(url: str, headers: dict = ADMIN, **params) -> list[dict]:
    response = httpx.get(f"{url}/audit", params={"limit": 1000, **params}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def test_each_mutating_call_is_one_row_allowed_or_refused_and_reads_none(guarded):
    cluster, tokens = guarded
    url, since = cluster.server_url, time.time()
    calls = [  # token name (None: none; "?": unknown), method, path, body, the answer, the action recorded
        ("dev", "POST", "/workflows", SOURCE, 201, "register"),
        ("dev", "POST", "/workflows/hello/run", {"input": 1}, 201, "run"),
        ("view", "POST", "/workflows/hello/run", {}, 403, "run"),
        ("dev-other", "POST", "/workflows/hello/run", {}, 404, "run"),
        ("?", "POST", "/workflows/hello/run", {}, 401, "run"),
        (None, "POST", "/workflows/hello/run", {}, 401, "run"),  # refused at the edge, before any route
        ("dev", "POST", "/executions/prune", {"older_than": 1}, 403, "prune"),
        ("dev", "POST", "/workflows", {"unknown": 1}, 422, "register"),
        ("dev", "POST", "/workers/nope/drain", None, 403, "drain"),
        ("api-token", "POST", "/workers/nope/drain", None, 404, "drain"),
        ("api-token", "DELETE", "/tokens/nobody", None, 404, "manage_tokens"),
    ]
    for name, method, path, body, status, _ in calls:
        token = ADMIN_TOKEN if name == "api-token" else "flux_unknown" if name == "?" else tokens.get(name)
        response = httpx.request(method, url + path, json=body, headers=bearer(token))
        assert response.status_code == status, (name, path, response.text)
    for path in ("/workflows", "/executions", "/schedules", "/audit", "/whoami", "/tokens"):  # reads
        assert httpx.get(url + path, headers=ADMIN).status_code == 200

    rows = eventually(lambda: len(rows := audit(url, since=since)) >= len(calls) and rows, 5, "rows never written")
    assert len(rows) == len(calls)  # no read recorded
    assert [r["id"] for r in rows] == sorted((r["id"] for r in rows), reverse=True)  # newest first
    roles = {"dev": "developer", "view": "viewer", "dev-other": "developer", "api-token": "admin"}
    for (name, method, path, _, status, action), row in zip(calls, reversed(rows)):
        assert (row["token"], row["role"]) == ((name, roles[name]) if name in roles else (None, None)), row
        assert (row["method"], row["target"], row["status"], row["client"]) == (method, path, status, "127.0.0.1"), row
        assert (row["action"], row["namespace"]) == (
            action,
            None if action in ("drain", "manage_tokens") else "default",
        )
        assert since <= row["time"] <= time.time()
    for row in rows:
        assert not any(secret in json.dumps(row) for secret in [ADMIN_TOKEN, *tokens.values()])


def test_rows_are_paged_filtered_and_seen_by_namespace(guarded):
    cluster, tokens = guarded
    url = cluster.server_url
    for _ in range(5):
        httpx.post(f"{url}/workflows/nope/run", json={}, headers=bearer(tokens["dev"]))
    rows = eventually(lambda: len(rows := audit(url, token="dev")) == 5 and rows, 5)
    pages, after = [], None
    while True:  # keyset pages of 2, as the CLI and the console follow them
        response = httpx.get(
            f"{url}/audit", params={"token": "dev", "limit": 2, **({"after": after} if after else {})}, headers=ADMIN
        )
        pages.append(response.json())
        after = response.headers.get("X-Next-Cursor")
        if after is None:
            break
    assert [len(p) for p in pages] == [2, 2, 1] and sum(pages, []) == rows
    assert {r["action"] for r in audit(url, action="manage_tokens")} == {"manage_tokens"}
    assert len(audit(url, action="manage_tokens")) == 4  # the fixture's four tokens
    assert audit(url, namespace="default", token="dev") == rows
    assert audit(url, since=time.time() + 60) == []

    other = bearer(tokens["ops-other"])  # an operator of "other" sees that namespace's rows only: none here
    assert audit(url, headers=other) == []
    assert audit(url, headers=other, namespace="default") == []
    assert httpx.get(f"{url}/audit", headers=bearer(tokens["dev"])).status_code == 403  # developers do not read it
    assert httpx.get(f"{url}/audit", params={"action": "fly"}, headers=ADMIN).status_code == 422


def test_no_call_changes_or_deletes_a_row_and_retention_prunes_them(guarded):
    cluster, tokens = guarded
    url = cluster.server_url
    for method in ("DELETE", "PATCH", "PUT", "POST"):
        assert httpx.request(method, f"{url}/audit", headers=ADMIN).status_code == 405
    assert httpx.delete(f"{url}/audit/1", headers=ADMIN).status_code == 404
    assert httpx.post(f"{url}/executions/prune", json={"older_than": 0.001}, headers=ADMIN).status_code == 200
    # the prune's own row written: the prune of executions left the audit log alone (a namespace, 4 tokens, the prune)
    eventually(lambda: [row["action"] for row in audit(url)].count("prune") == 1, 30, "no prune row")
    assert len(audit(url)) == 6

    time.sleep(1.5)  # every row older than the retention below: their age is what is tested
    cluster.stop_server()  # its last rows are written on the way out
    cluster.start_server(extra_args=("--retention", "1s"))  # prunes at start, in its own task
    eventually(lambda: audit(url) == [], 10, "the audit rows were never pruned")


def test_no_token_is_in_a_log_an_argv_or_an_event(guarded, workflow_file):
    cluster, tokens = guarded
    url = cluster.server_url
    dev = {"FLUX_API_TOKEN": tokens["dev"]}
    flux("workflow", "register", str(workflow_file(HELLO)), server_url=url, env=dev)
    cluster.start_worker("w1")
    ran = json.loads(
        flux(
            "workflow",
            "run",
            "hello",
            '"auditor"',
            "--wait",
            "--timeout",
            "60",
            "--format",
            "json",
            server_url=url,
            env=dev,
        ).stdout
    )
    assert ran["state"] == "COMPLETED"
    created = flux(
        "token",
        "create",
        "late",
        "--role",
        "viewer",
        "--format",
        "json",
        server_url=url,
        env={"FLUX_API_TOKEN": ADMIN_TOKEN},
    )
    secrets = [ADMIN_TOKEN, *tokens.values(), json.loads(created.stdout)["token"]]
    httpx.post(f"{url}/workflows/hello/run", json={}, headers=bearer("flux_" + "x" * 43))  # a wrong one, refused
    events = httpx.get(f"{url}/executions/{ran['id']}/events", headers=ADMIN).text
    logs = httpx.get(f"{url}/executions/{ran['id']}/logs", headers=ADMIN).text
    rows = json.dumps(eventually(lambda: len(rows := audit(url)) >= 8 and rows, 5))
    argv = [
        open(f"/proc/{process.pid}/cmdline", "rb").read().decode(errors="replace")
        for process in (cluster.server, *cluster.workers.values())
    ]
    cluster.close()  # every line the processes had to write is in their log files
    texts = {
        "events": events,
        "logs": logs,
        "audit": rows,
        "argv": " ".join(argv),
        **{path.name: path.read_text(errors="replace") for path in cluster.log_dir.glob("*.log")},
    }
    assert "server.log" in texts and "worker-w1.log" in texts
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"a token in {where}"
