"""``-n/--namespace``, ``FLUX_NAMESPACE``, ``[client] namespace`` and ``flux namespace``
against a real server (docs/namespaces.md)."""

from __future__ import annotations

import json

import pytest
from shared import HELLO, error_line, flux

from flux.client import FluxClient, FluxClientError


def test_the_client_refuses_a_malformed_namespace_before_any_call(monkeypatch):
    with pytest.raises(FluxClientError, match="namespace name '..' must be"):
        FluxClient("http://127.0.0.1:9", namespace="..")
    monkeypatch.setenv("FLUX_NAMESPACE", "team-a")
    with FluxClient("http://127.0.0.1:9") as client:
        assert client.namespace == "team-a" and client.scoped("/executions") == "/namespaces/team-a/executions"
        assert client.copy().namespace == "team-a"


@pytest.mark.slow  # over ~20 s: CI's second step
def test_every_client_command_acts_in_the_namespace_it_is_given(cluster, workflow_file, tmp_path, monkeypatch):
    url = cluster.server_url
    cluster.start_worker("w1")
    created = json.loads(flux("namespace", "create", "team-a", "--format", "json", server_url=url).stdout)
    assert (created["name"], created["state"]) == ("team-a", "ACTIVE")
    flux("workflow", "register", str(workflow_file(HELLO)), "-n", "team-a", server_url=url)

    monkeypatch.setenv("FLUX_NAMESPACE", "team-a")
    ran = json.loads(flux("workflow", "run", "hello", '"ns"', "--wait", "--format", "json", server_url=url).stdout)
    assert (ran["state"], ran["output"], ran["namespace"]) == ("COMPLETED", "Hello, ns", "team-a")
    assert [e["id"] for e in json.loads(flux("execution", "list", "--format", "json", server_url=url).stdout)] == [
        ran["id"]
    ]
    monkeypatch.delenv("FLUX_NAMESPACE")

    assert json.loads(flux("workflow", "list", "--format", "json", server_url=url).stdout) == []  # default's
    missing = error_line(flux("execution", "show", ran["id"], server_url=url, check=False))
    assert missing == f"Error: HTTP 404: execution '{ran['id']}' not found"
    assert "no execution matches" in error_line(flux("execution", "show", ran["id"][:8], server_url=url, check=False))
    shown = json.loads(
        flux("execution", "show", ran["id"][:8], "--namespace", "team-a", "--format", "json", server_url=url).stdout
    )
    assert shown["id"] == ran["id"]

    config = tmp_path / "flux.toml"
    config.write_text(f'[client]\nserver_url = "{url}"\nnamespace = "team-a"\nformat = "json"\n')
    listed = json.loads(flux("--config", str(config), "execution", "list").stdout)
    assert [e["id"] for e in listed] == [ran["id"]]
    counts = json.loads(flux("--config", str(config), "namespace", "show").stdout)
    assert counts["executions"] == {"COMPLETED": 1} and counts["workflows"] == 1

    names = [n["name"] for n in json.loads(flux("namespace", "list", "--format", "json", server_url=url).stdout)]
    assert names == ["default", "team-a"]
    unknown = error_line(flux("workflow", "list", "-n", "team-b", server_url=url, check=False))
    assert unknown == "Error: HTTP 404: namespace 'team-b' not found"
    bad = error_line(flux("workflow", "list", "-n", "a/b", server_url=url, check=False))
    assert bad.startswith("Error: namespace name 'a/b' must be")
    refused = error_line(flux("namespace", "delete", "default", server_url=url, check=False))
    assert refused == "Error: HTTP 409: namespace 'default' cannot be deleted"
    deleted = flux("namespace", "delete", "team-a", server_url=url)
    assert "deleted namespace team-a" in deleted.stderr


def test_the_client_sections_namespace_leaves_the_token_and_audit_commands_their_own(tmp_path):
    """``[client] namespace`` is every namespaced command's default; ``flux token create
    --namespace`` (a scope) and ``flux audit list --namespace`` (a filter) are not it."""
    from flux.cli import main
    from flux.cli.config import load_default_map
    from flux.cli.core import client_commands

    (tmp_path / "flux.toml").write_text('[client]\nnamespace = "team-a"\n')
    defaults = load_default_map(str(tmp_path / "flux.toml"), lambda: {}, lambda: client_commands(main))
    assert defaults["workflow"]["list"] == {"namespace": "team-a"}
    assert defaults["token"]["create"] == {} and defaults["audit"]["list"] == {}
