"""``flux.toml``: settings for ``flux start server``, ``flux start worker`` and the
client commands.

Precedence, highest first: command-line flag, ``FLUX_*`` environment variable,
``flux.toml``, built-in default. The file is ``--config PATH`` (or ``FLUX_CONFIG``),
else ``./flux.toml`` when it exists. Keys are the flags' names with underscores;
``[client]`` holds what every command that talks to a server uses (no token itself:
a file that holds it)::

    [client]
    server_url = "http://flux:8000"
    namespace = "team-a"
    api_token_file = "/run/secrets/flux-api-token"
    format = "json"

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

from pathlib import Path
from typing import Any, Callable

import click

DEFAULT_PATH = Path("flux.toml")
#: [client] keys and the parameter of every client command each one sets.
CLIENT_KEYS = {
    "server_url": "server_url",
    "namespace": "namespace",
    "api_token_file": "api_token_file",
    "format": "fmt",
}


def _worker_section(section: dict[str, Any]) -> dict[str, Any]:
    """TOML tables become the repeatable KEY=VALUE flags they stand for."""
    section = dict(section)
    if isinstance(section.get("labels"), dict):
        section["labels"] = [f"{k}={v}" for k, v in section["labels"].items()]
    if isinstance(section.get("resources"), dict):
        section["custom_resources"] = [f"{k}={v}" for k, v in section.pop("resources").items()]
    return section


def _unknown(file: Path, name: str, section: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(section) - known)
    if unknown:
        raise click.ClickException(
            f"{file} [{name}]: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )


def _client_defaults(section: dict[str, Any], commands: dict[tuple[str, ...], click.Command]) -> dict[str, Any]:
    """[client] settings as the defaults of every client command, nested by its path."""
    defaults = {CLIENT_KEYS[key]: value for key, value in section.items()}
    tree: dict[str, Any] = {}
    for path, command in commands.items():
        node = tree
        for name in path[:-1]:
            node = node.setdefault(name, {})
        namespaced = getattr(command.callback, "flux_namespaced", True)  # tokens, audit: --namespace is theirs
        node[path[-1]] = {k: v for k, v in defaults.items() if namespaced or k != "namespace"}
    return tree


def load_default_map(
    path: str | None,
    start_commands: Callable[[], dict[str, click.Command]],
    client_commands: Callable[[], dict[tuple[str, ...], click.Command]] | None = None,
) -> dict[str, Any] | None:
    """Read the TOML file into click's default_map, refusing keys no flag has.
    ``start_commands``: the ``start`` command of each section; ``client_commands``: the
    commands (by path below ``flux``) that [client] settings apply to. Both are asked
    for only when there is a file (they import every command's module)."""
    file = Path(path) if path else DEFAULT_PATH
    if not file.exists():
        if path:
            raise click.ClickException(f"config file {file} does not exist")
        return None
    import tomllib  # only when there is a file: most runs have none

    try:
        data = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise click.ClickException(f"{file} is not valid TOML: {exc}") from None
    sections, client = {}, {}
    commands = start_commands()
    known_sections = sorted([*commands, *(["client"] if client_commands is not None else [])])
    for name, section in data.items():
        if name not in known_sections:
            raise click.ClickException(f"{file}: unknown section [{name}] (known: {', '.join(known_sections)})")
        if not isinstance(section, dict):
            raise click.ClickException(f"{file}: [{name}] must be a table")
        if name == "client":
            _unknown(file, name, section, set(CLIENT_KEYS))
            client = _client_defaults(section, client_commands() if client_commands else {})
            continue
        section = _worker_section(section) if name == "worker" else section
        _unknown(file, name, section, {p.name for p in commands[name].params if isinstance(p, click.Option)})
        sections[name] = section
    default_map = {**client, **({"start": sections} if sections else {})}
    return default_map or None
