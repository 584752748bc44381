"""Server settings and the server's home folder (bootstrap token, default database)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_BODY_SIZE = 64 * 1024**2
DEFAULT_MAX_JSON_DEPTH = 64


def default_home() -> Path:
    return Path(os.environ.get("FLUX_HOME") or Path.home() / ".flux")


@dataclass
class ServerSettings:
    home: Path
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    #: Seconds without a heartbeat after which a worker is evicted and its work requeued.
    eviction_grace_period: float = 30.0
    #: Shared by every replica (e.g. from a Kubernetes secret); else HOME/bootstrap-token.
    bootstrap_token: str | None = None
    #: When set, client calls (register, run, cancel, drain, reads) must present it.
    api_token: str | None = None
    #: Largest request body in bytes (413 above it); 0 turns the limit off.
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    #: Deepest nesting of a JSON body (422 deeper).
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH

    def __post_init__(self) -> None:
        self.home = Path(self.home)
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'flux.db'}"

    @property
    def bootstrap_token_path(self) -> Path:
        return self.home / "bootstrap-token"


def ensure_bootstrap_token(home: Path) -> str:
    """Read the bootstrap token, creating it (mode 0600) on first start."""
    path = Path(home) / "bootstrap-token"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token
