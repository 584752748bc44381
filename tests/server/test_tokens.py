"""Client tokens (issue 33): created by an admin with a role and namespaces, the secret
shown once and stored as its hash only, listed without it, revoked and expired ones
refused at once, a worker's tokens and a client's never taken for one another. Real
server processes; the CLI as a subprocess."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from protocol import ProtocolWorker
from shared import HELLO, assert_error, error_line, flux
from waiting import eventually

ADMIN_TOKEN = "tokens-test-admin-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def guarded(make_cluster, monkeypatch):
    monkeypatch.delenv("FLUX_API_TOKEN", raising=False)
    cluster = make_cluster(server_args=("--api-token", ADMIN_TOKEN))
    for namespace in ("team-a", "team-b"):
        assert (
            httpx.post(f"{cluster.server_url}/namespaces", json={"name": namespace}, headers=ADMIN).status_code == 201
        )
    return cluster


def create(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/tokens", json=body, headers=ADMIN)


def test_a_token_is_shown_once_and_only_its_hash_is_stored(guarded):
    url = guarded.server_url
    created = create(url, name="ci", role="developer", namespaces=["team-b", "team-a", "team-a"], expires_in=3600)
    assert created.status_code == 201, created.text
    token = created.json()
    secret = token.pop("token")
    assert secret.startswith("flux_") and len(secret) > 40
    assert token["namespaces"] == ["team-a", "team-b"]
    assert 3599 < token["expires_at"] - token["created_at"] <= 3600
    listed = httpx.get(f"{url}/tokens", headers=ADMIN).json()
    assert listed == [{**token, "revoked_at": None}]
    assert secret not in json.dumps(listed)
    # the audit row of the creation is written too (in a batch of its own): read it back first
    eventually(
        lambda: any(row["action"] == "manage_tokens" for row in httpx.get(f"{url}/audit", headers=ADMIN).json()),
        30,
        "the creation's audit row was never written",
    )
    stored = b"".join(path.read_bytes() for path in guarded.home.glob("flux.db*"))
    assert stored and secret.encode() not in stored  # its sha256 only
    assert httpx.get(f"{url}/whoami", headers=bearer(secret)).json()["name"] == "ci"


def test_bad_requests_are_refused_with_the_reason(guarded):
    url = guarded.server_url
    assert create(url, name="ops", role="operator").status_code == 201
    assert "taken" in assert_error(create(url, name="ops", role="viewer"), 409, "conflict")["detail"]
    assert_error(create(url, name="api-token", role="viewer"), 409, "conflict")  # the server's own principals' names
    assert_error(create(url, name="x", role="root"), 422, "validation_error")
    assert_error(create(url, name="../x", role="viewer"), 422, "validation_error")
    assert_error(create(url, name="x", role="viewer", namespaces=[]), 422, "validation_error")
    assert_error(create(url, name="x", role="viewer", namespaces=["a/b"]), 422, "validation_error")
    assert assert_error(create(url, name="x", role="viewer", namespaces=["nowhere"]), 404, "not_found")["detail"] == (
        "namespace 'nowhere' not found"
    )
    assert_error(create(url, name="x", role="viewer", expires_in=-5), 422, "validation_error")
    assert_error(create(url, name="x", role="viewer", extra=1), 422, "validation_error")
    assert_error(httpx.delete(f"{url}/tokens/nobody", headers=ADMIN), 404, "not_found")


def test_revoked_and_expired_tokens_are_refused(guarded):
    url = guarded.server_url
    revoked = create(url, name="leaver", role="viewer").json()["token"]
    # 6 s: accepted first however loaded the machine (1.5 s was not, with a full CI run beside it)
    expiring = create(url, name="brief", role="viewer", expires_in=6).json()
    assert httpx.get(f"{url}/workflows", headers=bearer(expiring["token"])).status_code == 200
    assert httpx.get(f"{url}/workflows", headers=bearer(revoked)).status_code == 200

    gone = httpx.delete(f"{url}/tokens/leaver", headers=ADMIN).json()
    assert gone["revoked_at"] is not None
    refused = httpx.get(f"{url}/workflows", headers=bearer(revoked))  # this replica at once
    assert "revoked or expired" in assert_error(refused, 401, "unauthorized")["detail"]
    again = httpx.delete(f"{url}/tokens/leaver", headers=ADMIN).json()
    assert again["revoked_at"] == gone["revoked_at"]  # revoking twice keeps the first time
    assert create(url, name="leaver", role="viewer").status_code == 409  # its name stays taken

    eventually(lambda: time.time() > expiring["expires_at"], 15)
    assert_error(httpx.get(f"{url}/workflows", headers=bearer(expiring["token"])), 401, "unauthorized")
    names = {t["name"]: t for t in httpx.get(f"{url}/tokens", headers=ADMIN).json()}
    assert set(names) == {"leaver", "brief"}  # listed after revocation and expiry


def test_an_open_server_still_checks_a_presented_token(make_cluster, monkeypatch, workflow_file):
    monkeypatch.delenv("FLUX_API_TOKEN", raising=False)
    url = make_cluster().server_url  # no --api-token: every caller is the admin "anonymous"
    assert httpx.get(f"{url}/whoami").json() == {
        "name": "anonymous",
        "role": "admin",
        "namespaces": None,
        "namespace": "default",
    }
    viewer = httpx.post(f"{url}/tokens", json={"name": "v", "role": "viewer"}).json()["token"]
    assert_error(httpx.post(f"{url}/workflows/hello/run", json={}, headers=bearer(viewer)), 403, "forbidden")
    assert_error(httpx.get(f"{url}/workflows", headers=bearer("flux_unknown")), 401, "unauthorized")
    assert httpx.get(f"{url}/workflows").status_code == 200


def test_client_tokens_and_worker_tokens_are_never_taken_for_one_another_with_a_protocol_worker(guarded):
    url = guarded.server_url
    admin = create(url, name="root", role="admin").json()["token"]
    worker = ProtocolWorker(url, guarded.home, "w1", heartbeat_interval=5)
    try:
        worker.register()
        for token in (admin, ADMIN_TOKEN):
            assert (
                httpx.post(f"{url}/workers/w1/heartbeat", json={"running": []}, headers=bearer(token)).status_code
                == 401
            )
            assert httpx.post(f"{url}/workers/register", json={}, headers=bearer(token)).status_code == 401
        for token in (worker.token, worker.bootstrap):
            assert httpx.get(f"{url}/workflows", headers=bearer(token)).status_code == 401
            assert (
                httpx.post(f"{url}/tokens", json={"name": "x", "role": "admin"}, headers=bearer(token)).status_code
                == 401
            )
    finally:
        worker.close()


def test_the_cli_creates_lists_and_revokes_tokens(guarded, tmp_path, workflow_file):
    url, env_admin = guarded.server_url, {"FLUX_API_TOKEN": ADMIN_TOKEN}
    created = flux(
        "token",
        "create",
        "dev",
        "--role",
        "developer",
        "--namespace",
        "default",
        "--expires",
        "30d",
        server_url=url,
        env=env_admin,
    )
    secret = created.stdout.strip().splitlines()[-1]
    assert secret.startswith("flux_")
    assert "only time the token is shown" in created.stderr
    as_json = json.loads(
        flux("token", "create", "ro", "--role", "viewer", "--format", "json", server_url=url, env=env_admin).stdout
    )
    assert as_json["token"].startswith("flux_") and as_json["expires_at"] is None

    listed = flux("token", "list", "--format", "json", server_url=url, env=env_admin).stdout
    assert [t["name"] for t in json.loads(listed)] == ["dev", "ro"]
    assert secret not in listed and as_json["token"] not in listed
    table = flux("token", "list", server_url=url, env=env_admin).stdout
    assert "developer" in table and "default" in table and secret not in table

    dev = {"FLUX_API_TOKEN": secret}
    assert (
        json.loads(flux("token", "whoami", "--format", "json", server_url=url, env=dev).stdout)["role"] == "developer"
    )
    flux("workflow", "register", str(workflow_file(HELLO)), server_url=url, env=dev)
    assert "may not manage tokens (admin or above)" in error_line(
        flux("token", "list", server_url=url, env=dev, check=False)
    )
    revoked = flux("token", "revoke", "dev", server_url=url, env=env_admin)
    assert "revoked token dev" in revoked.stderr
    assert "HTTP 401" in error_line(flux("workflow", "list", server_url=url, env=dev, check=False))
    assert "not found" in error_line(flux("token", "revoke", "nobody", server_url=url, env=env_admin, check=False))


@pytest.mark.parametrize(
    "expires, says",
    [
        ("-1d", "'-1d' is in the past"),
        ("2001-01-01", "'2001-01-01' is in the past"),
        ("0", "must be more than 0 seconds"),
        ("soon", "'soon' is not a duration"),
        ("30x", "'30x' is not a duration"),
    ],
)
def test_a_bad_expiry_is_a_usage_error_naming_it(expires, says):
    result = flux(
        "token", "create", "x", "--role", "viewer", "--expires", expires, server_url="http://127.0.0.1:9", check=False
    )
    assert result.returncode == 2
    assert "Invalid value for '--expires'" in result.stderr and says in result.stderr
