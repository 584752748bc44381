"""One error body for every 4xx/5xx, on a real server: ``detail`` (human), ``code``
(machine), ``errors`` (field errors, validation only); and OpenAPI says so."""

from __future__ import annotations

import httpx
import pytest
from shared import SOURCE, assert_error

from flux.client import FluxClientError


def test_every_error_has_one_shape(cluster):
    with httpx.Client(base_url=cluster.server_url, timeout=10) as http:
        assert_error(http.get("/no/such/route"), 404, "not_found")
        assert_error(http.get("/workflows/nope"), 404, "not_found")
        assert_error(http.post("/workers/register", json={}), 401, "unauthorized")
        assert_error(http.post("/workflows", json={"source": "def (:", "workflows": [{"name": "x"}]}), 422, "invalid")

        body = assert_error(
            http.post("/workflows", json={"source": SOURCE, "workflows": [{"name": "x", "pending_timeout": "soon"}]}),
            422,
            "validation_error",
        )
        assert body["errors"] == [
            {"loc": ["body", "workflows", 0, "pending_timeout"], "msg": "Input should be a valid number"}
        ]
        assert "workflows.0.pending_timeout" in body["detail"]
        body = assert_error(http.get("/executions", params={"limit": 0}), 422, "validation_error")
        assert body["errors"][0]["loc"] == ["query", "limit"]
        body = assert_error(
            http.post("/workflows", content=b"{not json", headers={"content-type": "application/json"}),
            422,
            "validation_error",
        )
        assert "JSON" in body["detail"]

        assert http.post("/workflows", json={"source": SOURCE, "workflows": [{"name": "x"}]}).status_code == 201
        execution = http.post("/workflows/x/run", json={}).json()
        assert http.post(f"/executions/{execution['id']}/cancel").status_code == 200
        assert_error(http.post(f"/executions/{execution['id']}/cancel"), 409, "conflict")


def test_the_client_reports_the_human_reason(cluster, client):
    with pytest.raises(FluxClientError, match=r"HTTP 404: workflow 'nope' is not registered"):
        client.run("nope")
    with pytest.raises(FluxClientError, match=r"HTTP 422: limit: Input should be greater than or equal to 1"):
        client._request("GET", "/executions", params={"limit": 0})


def test_openapi_documents_the_error_answers_of_every_operation(cluster):
    spec = httpx.get(f"{cluster.server_url}/openapi.json", timeout=10).json()
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    assert set(spec["components"]["schemas"]["ErrorBody"]["properties"]) == {"detail", "code", "errors"}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            documented = operation["responses"]
            for status in ("413", "422"):  # the edge can refuse any call
                assert documented[status]["content"]["application/json"]["schema"] == error_ref, (method, path, status)
            if path not in ("/health", "/metrics"):
                assert "401" in documented, (method, path)
            if "{" in path:
                assert "404" in documented, (method, path)
    worker_ops = spec["paths"]["/workers/{name}/claim"]["post"]["responses"]
    assert {"401", "403", "404", "409", "413", "422"} <= set(worker_ops)
    assert "409" in spec["paths"]["/namespaces/{namespace}/executions/{execution_id}/cancel"]["post"]["responses"]
