"""The API is open on loopback only: a server listening beyond it with no API token
generates one into HOME/api-token (0600), says where, and never prints the token."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import httpx
import pytest

from flux.server.settings import is_loopback


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flux.cli", *args], capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("flux.example", False),
    ],
)
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


@pytest.mark.slow  # over ~20 s: CI's second step
def test_a_server_beyond_loopback_generates_and_stores_an_api_token(make_cluster, monkeypatch, tmp_path):
    monkeypatch.delenv("FLUX_API_TOKEN", raising=False)
    monkeypatch.delenv("FLUX_API_TOKEN_FILE", raising=False)
    cluster = make_cluster()
    path = cluster.home / "api-token"
    assert not path.exists()  # on loopback the API stays open
    cluster.stop_server()
    cluster.start_server(extra_args=("--host", "0.0.0.0"))  # clients below still connect over loopback

    token = path.read_text().strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    log = cluster.log("server")
    assert f"need the API token, generated into {path} (mode 0600)" in log
    assert token not in log

    url = cluster.server_url
    response = httpx.get(f"{url}/workflows")
    assert response.status_code == 401 and "API token" in response.json()["detail"]
    assert httpx.get(f"{url}/workflows", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    refused = cli("workflow", "list", "--server-url", url)
    assert refused.returncode != 0 and "HTTP 401" in refused.stderr
    assert cli("workflow", "list", "--server-url", url, "--api-token-file", str(path)).returncode == 0
    env = {**os.environ, "FLUX_API_TOKEN": token}
    assert cli("workflow", "list", "--server-url", url, env=env).returncode == 0

    cluster.stop_server()
    cluster.start_server(extra_args=("--host", "0.0.0.0"))
    assert path.read_text().strip() == token  # kept across restarts
    assert f"read from {path}" in cluster.log("server")


def test_the_server_reads_its_api_token_from_a_file(make_cluster, monkeypatch, tmp_path):
    monkeypatch.delenv("FLUX_API_TOKEN", raising=False)
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    cluster = make_cluster()
    cluster.stop_server()
    cluster.start_server(extra_args=("--api-token-file", str(token_file)))
    assert httpx.get(f"{cluster.server_url}/workflows").status_code == 401
    assert (
        httpx.get(f"{cluster.server_url}/workflows", headers={"Authorization": "Bearer from-a-file"}).status_code == 200
    )
    assert not (cluster.home / "api-token").exists()
