"""``flux.toml``: settings for ``flux start server`` and ``flux start worker``.

Precedence, highest first: command-line flag, ``FLUX_*`` environment variable,
``flux.toml``, built-in default. The file is ``--config PATH`` (or ``FLUX_CONFIG``),
else ``./flux.toml`` when it exists. Keys are the flags' names with underscores::

    [server]
    port = 8000
    database_url = "postgresql://flux@db/flux"
    eviction_grace_period = 30

    [worker]
    server_url = "http://flux:8000"
    max_concurrent_executions = 8
    heartbeat_interval = 5
    labels = { region = "us-east-1", gpu = "true" }
    resources = { fpga = 2 }
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import click

DEFAULT_PATH = Path("flux.toml")


def _worker_section(section: dict[str, Any]) -> dict[str, Any]:
    """TOML tables become the repeatable KEY=VALUE flags they stand for."""
    section = dict(section)
    if isinstance(section.get("labels"), dict):
        section["labels"] = [f"{k}={v}" for k, v in section["labels"].items()]
    if isinstance(section.get("resources"), dict):
        section["custom_resources"] = [f"{k}={v}" for k, v in section.pop("resources").items()]
    return section


def load_default_map(path: str | None, commands: dict[str, click.Command]) -> dict[str, Any] | None:
    """Read the TOML file into click's default_map, refusing keys no flag has."""
    file = Path(path) if path else DEFAULT_PATH
    if not file.exists():
        if path:
            raise click.ClickException(f"config file {file} does not exist")
        return None
    try:
        data = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise click.ClickException(f"{file} is not valid TOML: {exc}") from None
    sections = {}
    for name, section in data.items():
        if name not in commands:
            raise click.ClickException(f"{file}: unknown section [{name}] (known: {', '.join(sorted(commands))})")
        if not isinstance(section, dict):
            raise click.ClickException(f"{file}: [{name}] must be a table")
        section = _worker_section(section) if name == "worker" else section
        known = {p.name for p in commands[name].params if isinstance(p, click.Option)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise click.ClickException(f"{file} [{name}]: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        sections[name] = section
    return {"start": sections} if sections else None
