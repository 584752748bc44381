"""One rule for workflow names on the client (the decorator) and the server, and
names that cannot turn into another URL on their way there."""

from __future__ import annotations

import httpx
import pytest

from flux import workflow
from flux.client import FluxClientError

VALID = ["x", "_x", "9lives", "my-flow.v2", "a" * 128]
INVALID = [".hidden", "..", "a/b", "a b", "a\n", "a?b", "é", "", "a" * 129]


def source(name: str) -> str:
    return f"from flux import workflow\n\n@workflow.with_options(name={name!r})\nasync def w(ctx):\n    return 1\n"


async def body(ctx):
    return 1


@pytest.mark.parametrize("name", VALID)
def test_the_decorator_accepts_valid_names(name):
    assert workflow.with_options(name=name)(body).name == name


@pytest.mark.parametrize("name", INVALID)
def test_the_decorator_refuses_invalid_names(name):
    with pytest.raises(ValueError, match="letters, digits, '_', '-' or '.', not starting with '.'"):
        workflow.with_options(name=name)(body)


def test_the_server_applies_the_same_rule(cluster):
    with httpx.Client(base_url=cluster.server_url, timeout=10) as http:
        for name in VALID:
            response = http.post("/workflows", json={"source": source("x"), "workflows": [{"name": name}]})
            assert response.status_code == 201, (name, response.text)
        for name in INVALID:
            response = http.post("/workflows", json={"source": source("x"), "workflows": [{"name": name}]})
            assert response.status_code == 422, (name, response.text)
            assert response.json()["errors"][0]["loc"] == ["body", "workflows", 0, "name"]
            assert "not starting with '.'" in response.json()["detail"]


def test_the_client_quotes_every_path_segment(cluster, client, workflow_file):
    client.register_file(workflow_file(source("x")))
    assert client.show_workflow("x")["name"] == "x"
    # Unquoted, these would reach workflow 'x' (the rest read as a query or a fragment).
    for name in ("x?version=1", "x#frag", "x%3F"):
        with pytest.raises(FluxClientError, match=r"HTTP 404: workflow .* is not registered"):
            client.show_workflow(name)
        with pytest.raises(FluxClientError, match="HTTP 404"):
            client.run(name)
    with pytest.raises(FluxClientError, match="HTTP 404"):
        client.execution("../workflows/x")
