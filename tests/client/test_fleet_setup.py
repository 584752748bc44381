"""Setting up a fleet on one host (issue 50.3): ``flux server bootstrap-token`` and
``flux start worker`` without ``--home`` take the running server's token, whatever its
home, or refuse and say what to give, and never make a second token silently; ``flux
start server`` prints its console, where its token is and a worker line that works as
pasted. Real server and worker processes, under a HOME of the test's own."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import eventually

from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """The user's HOME for this test: servers leave their run files under it."""
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    for name in ("FLUX_HOME", "FLUX_BOOTSTRAP_TOKEN", "FLUX_BOOTSTRAP_TOKEN_FILE", "FLUX_SERVER_URL"):
        monkeypatch.delenv(name, raising=False)
    return user


def flux(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLUX_")}
    return subprocess.run([sys.executable, "-m", "flux", *args], capture_output=True, text=True, env=env, timeout=60)


def banner(cluster: LocalCluster) -> list[str]:
    """What the server printed, once it printed its worker line."""

    def printed() -> list[str] | None:
        lines = cluster.log("server").splitlines()
        return lines if any(line.startswith("start a worker: ") for line in lines) else None

    return eventually(printed, 15, "no worker line")


def online(url: str, name: str) -> bool:
    with FluxClient(url) as client:
        return any(w["name"] == name and w["state"] == "ONLINE" for w in client.list_workers())


def test_bootstrap_token_reads_the_running_servers_home_and_the_printed_worker_line_works(home, tmp_path):
    cluster = LocalCluster(tmp_path / "elsewhere")  # its --home is not ~/.flux
    try:
        cluster.start_server()
        lines = banner(cluster)
        token_file = cluster.home.resolve() / "bootstrap-token"
        assert f"console: http://127.0.0.1:{cluster.port}/ui" in lines
        assert f"bootstrap token: {token_file} (flux server bootstrap-token prints it)" in lines
        printed = flux("server", "bootstrap-token")
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.strip() == token_file.read_text().strip() and not printed.stderr
        assert not (home / ".flux" / "bootstrap-token").exists()  # no second token
        # the worker line as printed, run as is (the GPU probe off, as in every test)
        line = next(line for line in lines if line.startswith("start a worker: ")).removeprefix("start a worker: ")
        argv = shlex.split(line)
        assert argv[:3] == ["flux", "start", "worker"]
        worker = subprocess.Popen(
            [sys.executable, "-m", "flux", *argv[1:], "--gpu-source", "none"], env=dict(os.environ)
        )
        # and one given no token at all: it takes the token of the server its --server-url names
        bare = subprocess.Popen(
            [sys.executable, "-m", "flux", "start", "worker", "bare", "--server-url", cluster.server_url]
            + ["--gpu-source", "none"],
            env=dict(os.environ),
        )
        try:
            eventually(lambda: online(cluster.server_url, "worker-1") and online(cluster.server_url, "bare"), 30)
        finally:
            for process in (worker, bare):
                process.terminate()
                process.wait(timeout=30)
        assert not (home / ".flux" / "bootstrap-token").exists()
    finally:
        cluster.close()
    assert not list((home / ".flux" / "run").glob("server-*.json"))  # removed at stop


def test_two_servers_with_their_own_homes_are_named_not_guessed(home, tmp_path):
    clusters = [LocalCluster(tmp_path / f"home{i}") for i in range(2)]
    try:
        for cluster in clusters:
            cluster.start_server()
            banner(cluster)
        refused = flux("server", "bootstrap-token")
        assert refused.returncode == 1 and not refused.stdout
        assert "several Flux servers run here" in refused.stderr and "--port" in refused.stderr
        assert all(f"port {c.port}: home {c.home.resolve()}" in refused.stderr for c in clusters)
        assert not (home / ".flux" / "bootstrap-token").exists()
        for cluster in clusters:
            chosen = flux("server", "bootstrap-token", "--port", str(cluster.port))
            assert chosen.stdout.strip() == (cluster.home / "bootstrap-token").read_text().strip()
    finally:
        for cluster in clusters:
            cluster.close()


def test_a_server_given_its_token_as_a_value_is_not_answered_with_another(home, tmp_path, monkeypatch):
    monkeypatch.setenv("FLUX_BOOTSTRAP_TOKEN", "shared-by-every-replica")
    cluster = LocalCluster(tmp_path / "valued")
    try:
        cluster.start_server()
        assert any("with FLUX_BOOTSTRAP_TOKEN set to the same value" in line for line in banner(cluster))
        refused = flux("server", "bootstrap-token")
        assert refused.returncode == 1 and "as a value" in refused.stderr and not refused.stdout
        assert not (home / ".flux" / "bootstrap-token").exists()
    finally:
        cluster.close()


def test_with_no_server_running_a_token_is_made_and_that_is_said(home):
    made = flux("server", "bootstrap-token")
    path = home / ".flux" / "bootstrap-token"
    assert made.returncode == 0 and made.stdout.strip() == path.read_text().strip()
    assert f"no running server uses the default --home: made a new bootstrap token in {path}" in made.stderr
    again = flux("server", "bootstrap-token")
    assert again.stdout == made.stdout and not again.stderr
    nothing = flux("server", "bootstrap-token", "--port", "9")
    assert nothing.returncode == 1 and "no Flux server of yours runs on port 9" in nothing.stderr
