"""Scoped tokens and where a client finds its token (docs/security.md#roles,
docs/client.md), against a real server: a token with one namespace acts in it when
no namespace is given (CLI, ``FluxClient``, ``flux.Client``); a token with several is
told, on a namespace it may not use, which it may; ``flux token whoami`` shows them;
``flux.Client`` takes the token from ``FLUX_API_TOKEN_FILE`` and ``flux.toml`` as the
CLI does."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from shared import HELLO, error_line, flux

import flux as flux_sdk
from flux.client import FluxClient, FluxClientError

ADMIN_TOKEN = "token-namespaces-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
HINT = "token ml-dev may act in: ml, ml-eval; pass -n NAMESPACE"


@pytest.fixture
def scoped(make_cluster, monkeypatch):
    """A server with an admin token, namespaces ml, ml-eval and other, and two developer
    tokens: ml-solo (ml) and ml-dev (ml, ml-eval)."""
    for name in ("FLUX_API_TOKEN", "FLUX_API_TOKEN_FILE", "FLUX_NAMESPACE", "FLUX_SERVER_URL", "FLUX_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    cluster = make_cluster(server_args=("--api-token", ADMIN_TOKEN))
    url = cluster.server_url
    for namespace in ("ml", "ml-eval", "other"):
        assert httpx.post(f"{url}/namespaces", json={"name": namespace}, headers=ADMIN).status_code == 201
    tokens = {}
    for name, namespaces in (("ml-solo", ["ml"]), ("ml-dev", ["ml", "ml-eval"])):
        body = {"name": name, "role": "developer", "namespaces": namespaces}
        created = httpx.post(f"{url}/tokens", json=body, headers=ADMIN)
        assert created.status_code == 201, created.text
        tokens[name] = created.json()["token"]
    return url, tokens


def test_a_token_with_one_namespace_acts_in_it_without_n(scoped, workflow_file):
    url, tokens = scoped
    env = {"FLUX_API_TOKEN": tokens["ml-solo"]}
    flux("workflow", "register", str(workflow_file(HELLO)), server_url=url, env=env)
    listed = json.loads(flux("workflow", "list", "--format", "json", server_url=url, env=env).stdout)
    assert [w["name"] for w in listed] == ["hello"]
    ran = json.loads(flux("workflow", "run", "hello", '"ml"', "--format", "json", server_url=url, env=env).stdout)
    assert ran["namespace"] == "ml"
    executions = json.loads(flux("execution", "list", "--format", "json", server_url=url, env=env).stdout)
    assert [e["id"] for e in executions] == [ran["id"]]
    assert json.loads(flux("namespace", "show", "--format", "json", server_url=url, env=env).stdout)["name"] == "ml"
    assert httpx.get(f"{url}/namespaces/ml/workflows", headers=ADMIN).json()[0]["name"] == "hello"  # really in ml

    who = flux("token", "whoami", server_url=url, env=env).stdout
    assert "ml-solo" in who and "developer" in who and "ml" in who
    assert json.loads(flux("token", "whoami", "--format", "json", server_url=url, env=env).stdout) == {
        "name": "ml-solo",
        "role": "developer",
        "namespaces": ["ml"],
        "namespace": "ml",
    }
    admin = json.loads(
        flux("token", "whoami", "--format", "json", server_url=url, env={"FLUX_API_TOKEN": ADMIN_TOKEN}).stdout
    )
    assert admin["namespaces"] is None and admin["namespace"] == "default"
    assert "all" in flux("token", "whoami", server_url=url, env={"FLUX_API_TOKEN": ADMIN_TOKEN}).stdout

    with FluxClient(url, api_token=tokens["ml-solo"]) as client:  # the SDK, and flux.Client on it
        assert client.namespace == "ml" and [w["name"] for w in client.list_workflows()] == ["hello"]
    with flux_sdk.Client(url, api_token=tokens["ml-solo"]) as client:
        run = client.run("hello", "client")
        assert run.execution().namespace == "ml"
    with FluxClient(url, api_token=tokens["ml-solo"], namespace="default") as client:  # a namespace given wins
        with pytest.raises(FluxClientError, match="token ml-solo may act in: ml; pass -n NAMESPACE"):
            client.list_workflows()


def test_a_tokens_record_names_where_it_acts_and_its_namespaces_read_as_whoami_shows_them(scoped):
    """``token create``/``list`` (``POST``/``GET /tokens``) answer a token's ``namespace`` as
    ``whoami`` does: its only namespace, else default; the CLI shows its namespaces as
    whoami does (``all``, or ``ml, ml-eval``), never as JSON."""
    url, _ = scoped
    env = {"FLUX_API_TOKEN": ADMIN_TOKEN, "COLUMNS": "160"}
    listed = json.loads(flux("token", "list", "--format", "json", server_url=url, env=env).stdout)
    assert {t["name"]: t["namespace"] for t in listed} == {"ml-dev": None, "ml-solo": "ml"}  # ml-dev: no default
    created = flux(
        "token", "create", "eval-only", "--role", "viewer", "--namespace", "ml-eval", server_url=url, env=env
    )
    assert re.search(r"│ namespaces +│ ml-eval +│", created.stdout) and re.search(
        r"│ namespace +│ ml-eval +│", created.stdout
    )
    assert "[" not in created.stdout
    flux("token", "create", "reader", "--role", "viewer", server_url=url, env=env)
    rows = {
        line.split("│")[1].strip(): line
        for line in flux("token", "list", server_url=url, env=env).stdout.splitlines()
        if line.startswith("│")
    }
    assert "│ ml, ml-eval " in rows["ml-dev"] and "│ all " in rows["reader"] and "│ ml-eval " in rows["eval-only"]


def test_a_token_with_several_namespaces_is_told_which_it_may_use(scoped):
    url, tokens = scoped
    env = {"FLUX_API_TOKEN": tokens["ml-dev"]}
    refused = error_line(flux("workflow", "list", server_url=url, env=env, check=False))
    assert refused == f"Error: HTTP 404: namespace 'default' not found; {HINT}"
    other = error_line(flux("execution", "list", "-n", "other", server_url=url, env=env, check=False))
    assert other == f"Error: HTTP 404: namespace 'other' not found; {HINT}"
    assert (
        json.loads(flux("workflow", "list", "-n", "ml-eval", "--format", "json", server_url=url, env=env).stdout) == []
    )
    who = json.loads(flux("token", "whoami", "--format", "json", server_url=url, env=env).stdout)
    assert (who["namespaces"], who["namespace"]) == (["ml", "ml-eval"], None)  # no default it may not use
    shown = flux("token", "whoami", server_url=url, env={**env, "COLUMNS": "120"}).stdout
    assert re.search(r"│ namespaces +│ ml, ml-eval +│", shown), shown
    assert re.search(r"│ namespace +│ none: pass -n \(ml, ml-eval\) +│", shown), shown
    assert "default" not in shown, shown

    shown = httpx.get(f"{url}/namespaces/other", headers={"Authorization": f"Bearer {tokens['ml-dev']}"})
    assert shown.status_code == 404 and shown.json()["detail"] == f"namespace 'other' not found; {HINT}"
    with flux_sdk.Client(url, api_token=tokens["ml-dev"]) as client:
        with pytest.raises(FluxClientError, match=HINT):
            client.run("hello")


def test_the_client_reads_the_token_server_and_namespace_as_the_cli_does(scoped, tmp_path, monkeypatch):
    url, tokens = scoped
    token_file = tmp_path / "api-token"
    token_file.write_text(tokens["ml-dev"] + "\n")
    monkeypatch.setenv("FLUX_SERVER_URL", url)
    monkeypatch.setenv("FLUX_API_TOKEN_FILE", str(token_file))
    with flux_sdk.Client(namespace="ml-eval") as client:  # was: 401 missing API token (set FLUX_API_TOKEN)
        assert client.sdk.whoami()["name"] == "ml-dev" and list(client.executions()) == []
    monkeypatch.setenv("FLUX_API_TOKEN", tokens["ml-solo"])  # both in the environment: the file, as the CLI
    with flux_sdk.Client(namespace="ml") as client:
        assert client.sdk.whoami()["name"] == "ml-dev"
    with flux_sdk.Client(api_token=tokens["ml-solo"]) as client:  # an argument wins
        assert client.sdk.whoami()["name"] == "ml-solo" and client.sdk.namespace == "ml"
    for name in ("FLUX_SERVER_URL", "FLUX_API_TOKEN_FILE", "FLUX_API_TOKEN"):
        monkeypatch.delenv(name)

    (tmp_path / "flux.toml").write_text(
        f'[client]\nserver_url = "{url}"\nnamespace = "ml-eval"\napi_token_file = "{token_file}"\n'
    )
    monkeypatch.chdir(tmp_path)
    with flux_sdk.Client() as client:
        assert client.sdk.whoami()["name"] == "ml-dev" and client.sdk.namespace == "ml-eval"
        assert list(client.executions()) == []
    assert json.loads(flux("workflow", "list", "--format", "json").stdout) == []  # the CLI reads the same file
    monkeypatch.setenv("FLUX_NAMESPACE", "ml")  # the environment before the file
    with flux_sdk.Client() as client:
        assert client.sdk.namespace == "ml"

    (tmp_path / "empty").write_text("")
    with pytest.raises(FluxClientError, match="the file is empty"):
        flux_sdk.Client(api_token_file=tmp_path / "empty")
    (tmp_path / "flux.toml").write_text('[client]\nsever_url = "http://x"\n')
    with pytest.raises(FluxClientError, match=r"unknown setting\(s\) sever_url"):
        flux_sdk.Client()
