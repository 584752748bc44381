"""Limits at the edge (flux/server/request_limits.py) against a real server process: body size,
JSON depth, 64-bit integers, non-finite numbers, NUL characters, and anonymous calls
refused before their body is read."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

SOURCE = "from flux import workflow\n\n@workflow\nasync def x(ctx):\n    return ctx.input\n"
MiB = 1024**2
JSON = {"content-type": "application/json"}


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def raw_request(url: str, head: str) -> str:
    """Send only a request head (no body) and return the status line: the server must
    answer without waiting for the body it was promised."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.encode())
        return sock.recv(65536).decode(errors="replace").split("\r\n", 1)[0]


def stream(total: int, chunk: int = MiB):
    block = b"x" * chunk
    for _ in range(total // chunk):
        yield block


@pytest.fixture
def http(cluster):
    with httpx.Client(base_url=cluster.server_url, timeout=60) as client:
        assert client.post("/workflows", json={"source": SOURCE, "workflows": [{"name": "x"}]}).status_code == 201
        yield client


def refused(response: httpx.Response, loc: list, status: int = 422) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == "validation_error"
    assert body["errors"][0]["loc"] == loc
    return body["errors"][0]["msg"]


def test_json_nested_past_the_depth_limit_is_refused_naming_the_path(http):
    assert http.post("/workflows/x/run", json={"input": nested(63)}).status_code == 201  # 64 levels with the body
    assert "nested deeper than 64" in refused(
        http.post("/workflows/x/run", json={"input": nested(64)}), ["body", "input", *[0] * 63]
    )
    # Once accepted and then unreadable: every listing that carried it answered 500.
    assert "nested deeper" in refused(
        http.post("/workflows/x/run", json={"input": nested(300)}), ["body", "input", *[0] * 63]
    )
    deep = b'{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert "nested deeper" in refused(http.post("/workflows/x/run", content=deep, headers=JSON), ["body"])
    assert http.get("/executions").status_code == 200


def test_integers_must_fit_64_bits(http):
    for number in (2**63 - 1, -(2**63) + 1):
        assert http.post("/workflows/x/run", json={"input": {"n": number}}).status_code == 201
    for text in (str(2**63), str(-(2**63)), "9" * 5000):
        response = http.post("/workflows/x/run", content=f'{{"input": {{"n": {text}}}}}'.encode(), headers=JSON)
        assert "64-bit" in refused(response, ["body", "input", "n"])
    assert http.get("/executions").status_code == 200
    # Query integers too (found by schemathesis: SQLite refused the value with a 500).
    execution = http.post("/workflows/x/run", json={}).json()["id"]
    refused(http.get("/workflows/x", params={"version": 2**63}), ["query", "version"])
    refused(http.get(f"/executions/{execution}/events", params={"after": 2**63}), ["query", "after"])
    assert http.get("/workflows/x", params={"version": 2**63 - 1}).status_code == 404


def test_non_finite_numbers_are_refused(http):
    for text in ("NaN", "Infinity", "-Infinity", "1e999"):
        response = http.post("/workflows/x/run", content=f'{{"input": [1.5, {text}]}}'.encode(), headers=JSON)
        refused(response, ["body", "input", 1])


def test_a_json_body_that_is_not_text_is_refused(http):
    # Found by schemathesis: FastAPI answered 400, outside the documented contract.
    assert "UTF-8" in refused(
        http.post("/workflows/x/run", content=b'{"input": "\xff\xfe\xfa"}', headers=JSON), ["body"]
    )


def test_nul_characters_are_refused_in_body_path_and_query(http):
    # NUL breaks PostgreSQL text columns and compile().
    response = http.post("/workflows", json={"source": SOURCE + "# \x00", "workflows": [{"name": "y"}]})
    assert "NUL" in refused(response, ["body", "source"])
    refused(http.post("/workflows/x/run", json={"input": {"a\x00b": 1}}), ["body", "input", "a\\u0000b"])
    refused(http.get("/executions", params={"workflow": "x\x00"}), ["query"])
    refused(http.get("/workflows/x%00"), ["path"])
    assert http.get("/workflows/y").status_code == 404


def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(make_cluster):
    cluster = make_cluster()
    status = raw_request(
        cluster.server_url,
        f"POST /workflows HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {65 * MiB}\r\n\r\n",
    )
    assert status == "HTTP/1.1 413 Request Entity Too Large"


def test_a_streamed_body_is_cut_at_the_limit_and_the_server_holds_nothing(make_cluster):
    cluster = make_cluster()
    server = psutil.Process(cluster.server.pid)
    with httpx.Client(base_url=cluster.server_url, timeout=60) as http:
        http.get("/workflows")
        before = server.memory_info().rss
        for _ in range(10):  # 200 MB each, chunked: the client never holds one either
            response = http.post("/workflows", content=stream(200 * MiB), headers=JSON)
            assert response.status_code == 413 and response.json()["code"] == "payload_too_large"
        grown = server.memory_info().rss - before
        assert http.get("/health").status_code == 200
    assert grown < 100 * MiB, f"server RSS grew {grown / MiB:.0f} MiB"


@pytest.mark.slow  # over ~20 s: CI's second step
def test_the_body_limit_is_a_setting_and_zero_turns_it_off(make_cluster):
    small = make_cluster()
    small.stop_server()
    small.start_server(extra_args=("--max-body-size", "1Mi", "--max-json-depth", "3"))
    with httpx.Client(base_url=small.server_url, timeout=60) as http:
        body = json.dumps({"source": "x = 1\n" + "#" * MiB, "workflows": [{"name": "x"}]})
        assert http.post("/workflows", content=body, headers=JSON).status_code == 413
        assert http.post("/workflows", content=stream(2 * MiB), headers=JSON).status_code == 413
        assert (
            http.post(
                "/workflows", json={"source": "x = 1", "workflows": [{"name": "x", "requests": {"a": [1]}}]}
            ).status_code
            == 422
        )
    off = make_cluster()
    off.stop_server()
    off.start_server(extra_args=("--max-body-size", "0"))
    with httpx.Client(base_url=off.server_url, timeout=60) as http:
        body = json.dumps({"source": "x = 1\n" + "#" * (70 * MiB), "workflows": [{"name": "x"}]})
        assert http.post("/workflows", content=body, headers=JSON).status_code == 201


def test_anonymous_calls_are_refused_before_their_body_is_read(make_cluster, monkeypatch):
    monkeypatch.setenv("FLUX_API_TOKEN", "client-secret")
    cluster = make_cluster()
    head = "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
    for path in (
        "/workers/register",
        "/workers/w/claim",
        "/executions/e/checkpoint",
        "/executions/e/logs",
        "/workflows",
        "/workflows/x/run",
    ):
        assert raw_request(cluster.server_url, head.format(path=path)) == "HTTP/1.1 401 Unauthorized", path
    response = httpx.post(f"{cluster.server_url}/workers/register", json={})
    assert response.status_code == 401 and "bootstrap token" in response.json()["detail"]
    assert httpx.get(f"{cluster.server_url}/health").status_code == 200


def test_without_an_api_token_only_the_worker_protocol_needs_a_header(cluster):
    head = "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    assert raw_request(cluster.server_url, head.format(path="/workers/w/heartbeat")) == "HTTP/1.1 401 Unauthorized"
    assert raw_request(cluster.server_url, head.format(path="/workflows")) == "HTTP/1.1 422 Unprocessable Entity"


def test_every_response_carries_a_request_id_the_callers_own_when_sane(http):
    """``X-Request-ID``: echoed when the caller sends a sane one, else a fresh one per
    request (16 hex digits), also on refusals at the edge."""
    ids = {http.get("/health").headers["x-request-id"] for _ in range(20)}
    assert len(ids) == 20 and all(len(i) == 16 and int(i, 16) >= 0 for i in ids)
    assert http.get("/health", headers={"X-Request-ID": "trace-42.a_b"}).headers["x-request-id"] == "trace-42.a_b"
    insane = http.get("/health", headers={"X-Request-ID": "x" * 65}).headers["x-request-id"]
    assert insane != "x" * 65 and len(insane) == 16
    refusal = http.post("/workflows/x/run", content=json.dumps({"input": nested(100)}), headers=JSON)
    assert refusal.status_code == 422 and len(refusal.headers["x-request-id"]) == 16
