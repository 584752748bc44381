"""Secrets hygiene: no password in what the server prints, and the home, the SQLite
database and the token files are the owner's alone. Secrets work out of the box: a
server on SQLite makes its key in its home, and a task that asks for a secret nobody
set fails naming it and the command that sets it."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys

import httpx
import pytest
from shared import flux

from flux.client import FluxClient
from flux.local import free_port
from flux.server.secrets import HOME_KEY, home_key
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
        [
            sys.executable,
            "-m",
            "flux.cli",
            "start",
            "server",
            "--home",
            str(tmp_path / "home"),
            "--port",
            str(free_port()),
            "--database-url",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
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


NEEDS_SECRETS = """
from flux import task, workflow

@task.with_options(secret_requests=["API_KEY"])
def use(secrets):
    return len(secrets["API_KEY"])

@task.with_options(secret_requests=["MISSING_ONE"])
def missing(secrets):
    return "never"

@workflow
async def uses(ctx):
    return await use()

@workflow
async def misses(ctx):
    return await missing()
"""


def test_secrets_work_out_of_the_box_with_a_key_made_in_the_home(make_cluster, tmp_path):
    cluster = make_cluster(log_dir=tmp_path / "logs")
    key = cluster.home / HOME_KEY
    assert mode(key) == 0o600 and len(key.read_text().strip()) == 44  # one Fernet key
    cluster.start_worker("w1")
    stored = subprocess.run(
        [sys.executable, "-m", "flux.cli", "secret", "set", "API_KEY", "--server-url", cluster.server_url],
        input="s3cret-value\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stored.returncode == 0, stored.stderr
    source = tmp_path / "needs_secrets.py"
    source.write_text(NEEDS_SECRETS)
    with FluxClient(cluster.server_url) as client:
        client.register_file(source)
        assert client.run("uses", wait=60)["output"] == len("s3cret-value")
        failed = client.run("misses", wait=60)
    assert failed["state"] == "FAILED"
    assert "SecretsUnavailable: secret(s) not set in namespace 'default': MISSING_ONE" in failed["error"], failed[
        "error"
    ]
    assert "(set with: flux secret set MISSING_ONE)" in failed["error"]
    assert "AskFailed" not in failed["error"]
    listed = flux("secret", "list", server_url=cluster.server_url).stdout
    assert "API_KEY" in listed


def test_the_home_key_is_kept_a_given_key_wins_and_postgresql_gets_none(tmp_path, monkeypatch):
    sqlite = f"sqlite:///{tmp_path / 'flux.db'}"
    made = home_key(tmp_path, sqlite, None)
    assert made == tmp_path / HOME_KEY and home_key(tmp_path, sqlite, None).read_text() == made.read_text()
    given = tmp_path / "given.key"
    assert home_key(tmp_path, sqlite, given) == given
    assert home_key(tmp_path / "pg", "postgresql://flux@db/flux", None) is None  # replicas would each make their own
    monkeypatch.setenv("FLUX_SECRETS_KEY", "from-the-environment")
    assert home_key(tmp_path / "env", sqlite, None) is None and not (tmp_path / "env" / HOME_KEY).exists()
