"""``flux start worker --namespace``: the flag, its environment variable and flux.toml's
``[worker] namespaces`` all reach the worker's config; a malformed name stops it at start."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from flux import cli, worker


@pytest.fixture
def started(monkeypatch, tmp_path):
    """Runs ``flux start worker w ...`` without starting it; returns (result, config)."""
    seen = {}

    async def capture(self):
        seen["config"] = self.config

    monkeypatch.setattr(worker.Worker, "run", capture)

    def start(*args: str, env: dict | None = None, config: str | None = None):
        head = ["--config", str(tmp_path / "flux.toml")] if config is not None else []
        if config is not None:
            (tmp_path / "flux.toml").write_text(config)
        argv = [
            *head,
            "start",
            "worker",
            "w",
            "--bootstrap-token",
            "t",
            "--home",
            str(tmp_path),
            "--no-fork-children",
            *args,
        ]
        result = CliRunner().invoke(cli.main, argv, env=env)
        return result, seen.pop("config", None)

    return start


def test_the_flag_the_environment_and_the_config_file_restrict_a_worker(started):
    assert started()[1].namespaces == ()
    assert started("--namespace", "ml", "--namespace", "data", "--namespace", "ml")[1].namespaces == ("data", "ml")
    assert started(env={"FLUX_WORKER_NAMESPACES": "ml,data"})[1].namespaces == ("data", "ml")
    result, config = started(config='[worker]\nnamespaces = ["team-a", "ml"]\n')
    assert result.exit_code == 0, result.output
    assert config.namespaces == ("ml", "team-a")


def test_a_malformed_namespace_stops_the_worker_at_start(started):
    result, config = started("--namespace", "no/slash")
    assert result.exit_code == 2 and config is None
    assert "Invalid value for --namespace: namespace name 'no/slash' must be 1 to 128" in result.output
