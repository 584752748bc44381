"""What several test modules share: the CLI run as a subprocess, a workflow to
register, the error shape every 4xx/5xx answer has."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

HELLO = """
    from flux import task, workflow

    @task
    async def greet(name):
        return f"Hello, {name}"

    @workflow
    async def hello(ctx):
        return await greet(ctx.input)
"""


def flux(
    *args: str, server_url: str | None = None, home=None, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    if server_url:
        env["FLUX_SERVER_URL"] = server_url
    if home:
        env["FLUX_HOME"] = str(home)
    result = subprocess.run(
        [sys.executable, "-m", "flux.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one clear line, no traceback
    return lines[0]


SOURCE = "from flux import workflow\n\n@workflow\nasync def x(ctx):\n    return 1\n"


def assert_error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["code"] == code
    assert set(body) <= {"detail", "code", "errors"}
    return body
