"""flux-core's ``flux.config.Configuration``, read-only, mapped onto this engine's settings
(docs/migrating-from-flux-core.md#configuration).

flux-core code reads ``Configuration.get().settings.home`` or
``...settings.workers.server_url`` to find the engine's home folder or server. Here each
key that has a counterpart reads it the way ``flux start`` does (the ``FLUX_*`` variable,
else ``flux.toml``'s ``[server]``/``[worker]``/``[client]`` key, else our default), so the
value is the one this engine actually uses. A key without a counterpart raises
``AttributeError`` naming it, and so does writing or ``override()``: flux-core's settings
configured flux-core's own runtime in the process; ours are fixed when a process starts,
so a changed value would change nothing (a silent difference), and is refused instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flux.client.sdk import DEFAULT_SERVER_URL
from flux.output_storage import default_storage_dir
from flux.server.settings import default_home

__all__ = ["Configuration", "FluxSettings", "WorkersSettings"]

GUIDE = "docs/migrating-from-flux-core.md#configuration"
#: flux-core settings a user may look for, and where they live here.
ELSEWHERE = {
    "security": "secrets are FLUX_SECRETS_KEY and 'flux secret set'; tokens are 'flux token'",
    "serializer": "results are JSON; output_storage=LocalFileStorage() keeps other values",
    "log_level": "flux --debug / --log-format of each command",
    "ai": "the AI agent layer is not part of this engine",
    "mcp": "the AI agent layer is not part of this engine",
    "bootstrap_token": "read by 'flux start worker' (FLUX_BOOTSTRAP_TOKEN), never by workflow code",
}


def _toml(section: str) -> dict[str, Any]:
    """``flux.toml``'s ``[section]`` as ``flux start`` reads it (``FLUX_CONFIG``, else ./flux.toml)."""
    path = Path(os.environ.get("FLUX_CONFIG") or "flux.toml")
    if not path.is_file():
        return {}
    import tomllib

    table = tomllib.loads(path.read_text()).get(section)
    return table if isinstance(table, dict) else {}


def _read(variable: str, section: str, key: str, default: Any) -> Any:
    value = os.environ.get(variable)
    return value if value not in (None, "") else _toml(section).get(key, default)


class _Missing:
    """A settings object: what flux-core had and this engine lacks is named, never None.
    Frozen: assigning raises (dataclasses' ``FrozenInstanceError``, an AttributeError)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        where = ELSEWHERE.get(name, "not a setting of this engine")
        raise AttributeError(f"flux.config: settings.{name} has no counterpart here: {where} (see {GUIDE})")


@dataclass(frozen=True)
class WorkersSettings(_Missing):
    server_url: str
    labels: dict[str, str]
    max_concurrent_executions: int


@dataclass(frozen=True)
class FluxSettings(_Missing):
    home: str
    server_host: str
    server_port: int
    database_url: str
    debug: bool
    local_storage_path: str
    workers: WorkersSettings

    @classmethod
    def load(cls) -> FluxSettings:
        home = str(_read("FLUX_HOME", "server", "home", None) or default_home())
        labels = os.environ.get("FLUX_LABELS")
        return cls(
            home=home,
            server_host=str(_read("FLUX_HOST", "server", "host", "127.0.0.1")),
            server_port=int(_read("FLUX_PORT", "server", "port", 8000)),
            database_url=str(
                _read("FLUX_DATABASE_URL", "server", "database_url", None) or f"sqlite:///{Path(home) / 'flux.db'}"
            ),
            debug=os.environ.get("FLUX_DEBUG", "").lower() in ("1", "true", "yes", "on"),
            local_storage_path=str(default_storage_dir()),
            workers=WorkersSettings(
                server_url=str(
                    _read("FLUX_SERVER_URL", "worker", "server_url", None)
                    or _toml("client").get("server_url")
                    or DEFAULT_SERVER_URL
                ),
                labels=dict(pair.split("=", 1) for pair in labels.split() if "=" in pair)
                if labels
                else {str(k): str(v) for k, v in _toml("worker").get("labels", {}).items()},
                max_concurrent_executions=int(
                    _read("FLUX_MAX_CONCURRENT_EXECUTIONS", "worker", "max_concurrent_executions", 4)
                ),
            ),
        )


class Configuration:
    """flux-core's singleton: ``Configuration.get().settings`` (read when first asked,
    again after ``reload()`` or ``reset()``)."""

    _instance: Configuration | None = None
    _settings: FluxSettings | None = None

    def __new__(cls) -> Configuration:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @staticmethod
    def get() -> Configuration:
        return Configuration()

    @property
    def settings(self) -> FluxSettings:
        if self._settings is None:
            type(self)._settings = FluxSettings.load()
        return self._settings  # type: ignore[return-value]

    def reload(self) -> None:
        type(self)._settings = FluxSettings.load()

    def reset(self) -> None:
        type(self)._settings = None

    def override(self, **kwargs: Any) -> None:
        raise AttributeError(
            f"flux.config: Configuration.override({', '.join(kwargs)}) is refused: settings are read "
            f"when a process starts here; set the FLUX_* variable or flux.toml (see {GUIDE})"
        )
