"""Secrets hygiene: no password in what the server prints, and the home, the SQLite
database and the token files are the owner's alone."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys

import httpx
import pytest

from flux.local import free_port
from flux.server.settings import redact_url


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    "url, shown",
    [
        ("postgresql://flux:s3cret@db:5432/flux", "postgresql://flux:***@db:5432/flux"),
        ("postgresql://flux:p%40ss:w@db/flux?sslmode=require", "postgresql://flux:***@db/flux?sslmode=require"),
        ("postgresql://flux@db/flux", "postgresql://flux@db/flux"),
        ("sqlite:////var/lib/flux/flux.db", "sqlite:////var/lib/flux/flux.db"),
    ],
)
def test_redact_url_hides_only_the_password(url, shown):
    assert redact_url(url) == shown


def test_the_start_up_line_never_shows_the_database_password(tmp_path):
    # Nothing listens on this port: the server prints its start-up line, then fails to migrate.
    url = f"postgresql://flux:s3cret@127.0.0.1:{free_port()}/flux"
    result = subprocess.run(
        [sys.executable, "-m", "flux.cli", "start", "server", "--home", str(tmp_path / "home"),
         "--port", str(free_port()), "--database-url", url],
        capture_output=True, text=True, timeout=60,
    )
    output = result.stdout + result.stderr
    assert "postgresql://flux:***@127.0.0.1" in output
    assert "s3cret" not in output


def test_home_database_and_tokens_are_owner_only(make_cluster, tmp_path):
    cluster = make_cluster(log_dir=tmp_path / "logs")  # so the server creates the home itself
    with httpx.Client(base_url=cluster.server_url, timeout=10) as http:
        source = "from flux import workflow\n\n@workflow\nasync def x(ctx):\n    return 1\n"
        assert http.post("/workflows", json={"source": source, "workflows": [{"name": "x"}]}).status_code == 201
    assert mode(cluster.home) == 0o700
    for name in ("flux.db", "flux.db-wal", "flux.db-shm", "bootstrap-token"):
        assert mode(cluster.home / name) == 0o600, name


def test_existing_database_and_token_files_are_made_owner_only(make_cluster, tmp_path):
    home = tmp_path / "home0"
    home.mkdir()
    sqlite3.connect(home / "flux.db").close()
    (home / "bootstrap-token").write_text("old-token\n")
    for path in (home / "flux.db", home / "bootstrap-token"):
        path.chmod(0o644)
    make_cluster(log_dir=tmp_path / "logs")
    assert mode(home / "flux.db") == 0o600 and mode(home / "bootstrap-token") == 0o600
