"""Roles (issue 33): every client operation of the OpenAPI schema, tried against a real
server with a token of each role, and with a token of each role scoped to another
namespace. Allowed: any answer but 401/403 (the call itself may be a 404 or a 422: it
names nothing real); not allowed: 403 naming the role it needs; another namespace:
404, as if nothing were there. One action of each role's tier is then made for real
and its effect read back. The expected table below is written apart from
``flux.server.access.ACTIONS``, so a wrong entry there fails here."""

from __future__ import annotations

import httpx
import pytest
from shared import SOURCE

from flux.domain.access import ORDER, Role

ADMIN_TOKEN = "roles-test-admin-token"
#: The least role each client operation needs; "fleet": any token of every namespace, or an operator.
EXPECTED = {
    ("GET", "/namespaces/{namespace}/workflows"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/workflows/{name}"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/workflows/{name}/versions"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/executions"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/executions/{execution_id}"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/executions/{execution_id}/placement"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/executions/{execution_id}/logs"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/executions/{execution_id}/events"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/watch/executions"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/schedules"): Role.VIEWER,
    ("GET", "/namespaces/{namespace}/schedules/{name}"): Role.VIEWER,
    ("POST", "/namespaces/{namespace}/workflows"): Role.DEVELOPER,
    ("POST", "/namespaces/{namespace}/workflows/bundle"): Role.DEVELOPER,
    ("POST", "/bundles"): Role.DEVELOPER,
    ("POST", "/namespaces/{namespace}/workflows/{name}/run"): Role.DEVELOPER,
    ("POST", "/namespaces/{namespace}/executions/{execution_id}/cancel"): Role.DEVELOPER,
    ("POST", "/namespaces/{namespace}/executions/{execution_id}/resume"): Role.DEVELOPER,
    ("POST", "/namespaces/{namespace}/schedules/{name}/pause"): Role.DEVELOPER,
    ("POST", "/namespaces/{namespace}/schedules/{name}/resume"): Role.DEVELOPER,
    ("POST", "/namespaces/{namespace}/schedules/{name}/trigger"): Role.DEVELOPER,
    ("POST", "/namespaces/{namespace}/schedules"): Role.OPERATOR,
    ("PATCH", "/namespaces/{namespace}/schedules/{name}"): Role.OPERATOR,
    ("DELETE", "/namespaces/{namespace}/schedules/{name}"): Role.OPERATOR,
    ("PUT", "/namespaces/{namespace}/secrets/{name}"): Role.OPERATOR,
    ("DELETE", "/namespaces/{namespace}/secrets/{name}"): Role.OPERATOR,
    ("GET", "/namespaces/{namespace}/secrets"): Role.OPERATOR,
    ("POST", "/namespaces/{namespace}/hooks"): Role.OPERATOR,
    ("GET", "/namespaces/{namespace}/hooks"): Role.OPERATOR,
    ("GET", "/namespaces/{namespace}/hooks/{name}"): Role.OPERATOR,
    ("DELETE", "/namespaces/{namespace}/hooks/{name}"): Role.OPERATOR,
    ("POST", "/namespaces/{namespace}/hooks/{name}/test"): Role.OPERATOR,
    ("GET", "/namespaces/{namespace}/hooks/{name}/deliveries"): Role.OPERATOR,
    ("GET", "/namespaces/{namespace}/hooks/{name}/deliveries/{delivery_id}"): Role.OPERATOR,
    ("POST", "/namespaces/{namespace}/hooks/{name}/deliveries/{delivery_id}/redeliver"): Role.OPERATOR,
    ("DELETE", "/namespaces/{namespace}/cache"): Role.OPERATOR,
    ("POST", "/namespaces/{namespace}/executions/prune"): Role.OPERATOR,
    ("GET", "/audit"): Role.OPERATOR,
    ("POST", "/workers/{name}/drain"): Role.OPERATOR,
    ("POST", "/workers/{name}/undrain"): Role.OPERATOR,
    ("GET", "/workers"): "fleet",
    ("GET", "/workers/{name}"): "fleet",
    ("POST", "/pools"): Role.OPERATOR,
    ("PUT", "/pools/{name}"): Role.OPERATOR,
    ("DELETE", "/pools/{name}"): Role.OPERATOR,
    ("GET", "/pools"): "fleet",
    ("GET", "/pools/{name}"): "fleet",
    ("GET", "/autoscale/desired"): "fleet",
    ("GET", "/fleet"): "fleet",
    ("GET", "/fleet/history"): "fleet",
    ("POST", "/tokens"): Role.ADMIN,
    ("GET", "/tokens"): Role.ADMIN,
    ("DELETE", "/tokens/{name}"): Role.ADMIN,
    ("GET", "/namespaces"): Role.VIEWER,
    ("GET", "/namespaces/{name}"): Role.VIEWER,
    ("POST", "/namespaces"): Role.ADMIN,
    ("DELETE", "/namespaces/{name}"): Role.ADMIN,
    ("PATCH", "/namespaces/{name}"): Role.ADMIN,  # its weight and quota (docs/contention.md)
    ("PUT", "/namespaces/{name}/quota"): Role.ADMIN,  # its whole quota, replaced
}
#: Operations about no namespace: a token of another namespace is judged by its role alone.
UNNAMESPACED = {
    op
    for op, role in EXPECTED.items()
    if role == "fleet" or op[1].startswith(("/workers", "/pools", "/tokens", "/audit"))
}
UNNAMESPACED |= {("GET", "/namespaces"), ("POST", "/namespaces")}  # the list shows each token what it sees
UNNAMESPACED |= {("POST", "/bundles")}  # a bundle is stored once for all; registering it is namespaced
#: The worker protocol and what needs no token: not client operations.
NOT_CLIENT = {
    ("GET", "/health"),
    ("GET", "/metrics"),
    ("GET", "/whoami"),
    ("POST", "/workers/register"),
    ("POST", "/workers/{name}/heartbeat"),
    ("POST", "/workers/{name}/claim"),
    ("POST", "/workers/{name}/shutdown"),
    ("POST", "/executions/{execution_id}/checkpoint"),
    ("POST", "/executions/{execution_id}/rendezvous"),
    ("POST", "/executions/{execution_id}/logs"),
    ("POST", "/executions/{execution_id}/secrets"),
    ("GET", "/bundles/{sha256}"),
    ("POST", "/cache/lookup"),
}


def rank(role: Role) -> int:
    return ORDER.index(role)


def allowed(role: Role, unscoped: bool, needed) -> bool:  # noqa: ANN001 - a Role or "fleet"
    if needed == "fleet":
        return unscoped or rank(role) >= rank(Role.OPERATOR)
    return rank(role) >= rank(needed)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from flux.local import LocalCluster

    with LocalCluster(tmp_path_factory.mktemp("roles") / "home", server_args=("--api-token", ADMIN_TOKEN)) as cluster:
        cluster.start_server()
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        tokens = {}
        for role in ORDER:
            for scope, namespaces in (("all", None), ("other", ["other"])):
                body = {"name": f"{role}-{scope}", "role": role.value, "namespaces": namespaces}
                if namespaces:
                    httpx.post(f"{cluster.server_url}/namespaces", json={"name": namespaces[0]}, headers=admin)
                created = httpx.post(f"{cluster.server_url}/tokens", json=body, headers=admin)
                assert created.status_code == 201, created.text
                tokens[role, scope] = created.json()["token"]
        schema = httpx.get(f"{cluster.server_url}/openapi.json").json()
        yield cluster.server_url, tokens, schema


def operations(schema: dict) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}


def call(url: str, method: str, path: str, token: str) -> httpx.Response:
    """The operation on names that do not exist, with an empty body: it reaches the check."""
    concrete = path.replace("{execution_id}", "0" * 32).replace("{name}", "nope").replace("{namespace}", "default")
    headers = {"Authorization": f"Bearer {token}"}
    if path == "/bundles":
        return httpx.request(
            method, url + concrete, content=b"", headers={**headers, "Content-Type": "application/zip"}
        )
    body = {} if method in ("POST", "PUT", "PATCH") else None
    return httpx.request(method, url + concrete, json=body, headers=headers, timeout=30)


def test_the_expected_table_is_every_client_operation_of_the_schema(server):
    _, _, schema = server
    assert operations(schema) - NOT_CLIENT == set(EXPECTED)


def test_every_mutating_client_route_has_an_action():
    """The check ``create_app`` runs (it refuses to build an app otherwise), on today's routes."""
    import tempfile
    from pathlib import Path

    from flux.server import access, auth
    from flux.server.app import create_app
    from flux.server.request_limits import flattened
    from flux.server.settings import ServerSettings

    app = create_app(ServerSettings(home=Path(tempfile.mkdtemp())))
    routes = access.client_routes(flattened(app.routes), auth.is_client)
    assert access.unlisted(routes) == []
    # each namespaced route twice, under the prefix and at its alias for 'default'
    assert {(m, access.unprefixed(r.template)) for r in routes for m in r.methods} == {
        (m, access.unprefixed(path)) for m, path in EXPECTED
    }
    access.ACTIONS.pop(("POST", "/workflows/{name}/run"))
    try:
        with pytest.raises(RuntimeError, match="POST /workflows/{name}/run"):
            create_app(ServerSettings(home=Path(tempfile.mkdtemp())))
    finally:
        from flux.domain.access import Action

        access.ACTIONS[("POST", "/workflows/{name}/run")] = Action.RUN


def answers(server, role: Role, scope: str):  # noqa: ANN001, ANN201 - the fixture; a generator
    """Each operation, the role it needs, and the answer to a token of ``role`` in ``scope``."""
    url, tokens, _ = server
    for (method, path), needed in sorted(EXPECTED.items(), key=str):
        response = call(url, method, path, tokens[role, scope])
        what = f"{role}@{scope} {method} {path}: {response.status_code} {response.text[:200]}"
        assert response.status_code < 500, what
        yield (method, path), needed, response, what


@pytest.mark.parametrize("role", ORDER, ids=str)
def test_each_role_is_allowed_what_its_role_allows_and_refused_the_rest(server, role):
    for _, needed, response, what in answers(server, role, "all"):
        if allowed(role, True, needed):
            assert response.status_code not in (401, 403), what
            assert "namespace 'default' not found" not in response.text, (
                what
            )  # a 404 is the thing's, not the namespace's
        else:
            assert response.status_code == 403, what
            body = response.json()
            assert body["code"] == "forbidden" and body["detail"].startswith(f"role {role} may not"), what
            assert "or above" in body["detail"], what


@pytest.mark.parametrize("role", ORDER, ids=str)
def test_a_token_of_another_namespace_finds_nothing_in_this_one(server, role):
    for operation, needed, response, what in answers(server, role, "other"):
        if role == Role.ADMIN:  # an admin acts in every namespace, whatever it was given
            assert response.status_code not in (401, 403), what
        elif operation in UNNAMESPACED:
            assert (response.status_code != 403) == allowed(role, False, needed), what
        else:
            named = "nope" if operation[1].startswith("/namespaces/{name}") else "default"
            assert response.status_code == 404, what
            scope = f"token {role}-other may act in: other; pass -n NAMESPACE"  # the same whether it exists or not
            assert response.json()["detail"] == f"namespace '{named}' not found; {scope}", what


def acted(url: str, role: Role, tier: Role, token: str) -> tuple[bool, bool]:
    """One real call of the kind ``tier`` allows, with a valid body, made with ``token``:
    whether it was refused (403), and whether what it does is there afterwards (read
    back with the admin token). The names are the role's own: each role's calls apart."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        if tier == Role.VIEWER:  # it reads the workflow the admin registered
            response = http.get("/namespaces/default/workflows")
            done = response.status_code == 200 and "x" in {w["name"] for w in response.json()}
        elif tier == Role.DEVELOPER:  # a run, then its cancellation
            response = http.post("/workflows/x/run", json={"input": role.value})
            if response.status_code == 403:
                return True, False
            run = response.json()["id"]
            response = http.post(f"/executions/{run}/cancel", json={})
            done = httpx.get(f"{url}/executions/{run}", headers=admin).json()["state"] in ("CANCELLED", "CANCELLING")
        elif tier == Role.OPERATOR:  # a schedule made
            response = http.post("/schedules", json={"name": f"by-{role.value}", "workflow": "x", "every": "1h"})
            done = httpx.get(f"{url}/schedules/by-{role.value}", headers=admin).status_code == 200
            httpx.delete(f"{url}/schedules/by-{role.value}", headers=admin)  # the other tests see none
        else:  # a namespace made
            response = http.post("/namespaces", json={"name": f"by-{role.value}"})
            done = httpx.get(f"{url}/namespaces/by-{role.value}", headers=admin).status_code == 200
            httpx.delete(f"{url}/namespaces/by-{role.value}", headers=admin)  # the other tests see none
    return response.status_code == 403, done


@pytest.mark.parametrize("role", ORDER, ids=str)
def test_what_a_role_is_allowed_happens_and_what_it_is_refused_does_not(server, role):
    """ "Allowed" above only means "not 401/403" on names that do not exist: here each
    tier's action is made for real, and what it does is read back."""
    url, tokens, _ = server
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    registered = httpx.post(f"{url}/workflows", json={"source": SOURCE, "workflows": [{"name": "x"}]}, headers=admin)
    assert registered.status_code in (200, 201), registered.text
    for tier in ORDER:
        refused, done = acted(url, role, tier, tokens[role, "all"])
        may = rank(role) >= rank(tier)
        assert (refused, done) == (not may, may), f"{role} doing a {tier}'s action: refused={refused}, done={done}"


def test_a_scoped_token_acts_in_its_namespace_and_lists_only_that_one(server):
    url, tokens, _ = server
    viewer = {"Authorization": f"Bearer {tokens[Role.VIEWER, 'other']}"}
    assert httpx.get(f"{url}/namespaces/other/workflows", headers=viewer).status_code == 200
    assert [n["name"] for n in httpx.get(f"{url}/namespaces", headers=viewer).json()] == ["other"]
    assert httpx.get(f"{url}/namespaces/other", headers=viewer).json()["name"] == "other"
    everyone = {"Authorization": f"Bearer {tokens[Role.VIEWER, 'all']}"}
    assert {n["name"] for n in httpx.get(f"{url}/namespaces", headers=everyone).json()} == {"default", "other"}


def test_whoami_answers_any_valid_token_and_no_other(server):
    url, tokens, _ = server
    for (role, scope), token in tokens.items():
        who = httpx.get(f"{url}/whoami", headers={"Authorization": f"Bearer {token}"}).json()
        assert who == {
            "name": f"{role}-{scope}",
            "role": role.value,
            "namespaces": None if scope == "all" else ["other"],
            "namespace": "default" if scope == "all" else "other",  # where a client that names none acts
        }
    assert httpx.get(f"{url}/whoami", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()["name"] == "api-token"
    assert httpx.get(f"{url}/whoami", headers={"Authorization": "Bearer flux_nope"}).status_code == 401
    assert httpx.get(f"{url}/whoami").status_code == 401


def test_a_developer_of_one_namespace_registers_a_bundle_there(server, tmp_path):
    """The upload (``POST /bundles``, stored once for every namespace) is not judged in
    ``default``; the registration that follows is, in the token's namespace: the one
    given, else the token's only one."""
    from flux.client import FluxClient, FluxClientError

    url, tokens, _ = server
    (tmp_path / "flows.py").write_text(SOURCE)
    with FluxClient(url, api_token=tokens[Role.DEVELOPER, "other"], namespace="other") as client:
        assert [w["name"] for w in client.register(tmp_path / "flows.py")] == ["x"]
    with FluxClient(url, api_token=tokens[Role.DEVELOPER, "other"]) as client:
        assert [w["name"] for w in client.register(tmp_path / "flows.py")] == ["x"]
        assert client.namespace == "other"
    with (
        FluxClient(url, api_token=tokens[Role.DEVELOPER, "other"], namespace="default") as client,
        pytest.raises(FluxClientError) as refused,
    ):
        client.register(tmp_path / "flows.py")
    assert refused.value.status == 404 and "namespace 'default' not found" in str(refused.value)
