"""Server settings and the server's home folder (bootstrap token, default database)."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

#: Where ``--processes N`` hands the settings to each server process.
SETTINGS_ENV = "FLUX_SERVER_SETTINGS_JSON"


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
    #: Seconds between flushes of worker leases (liveness) to the database. None: 10 s
    #: when replicas may share it (PostgreSQL), 300 s on SQLite (one server process).
    lease_interval: float | None = None
    #: Shed (503 + Retry-After) new work once database work has queued this long; 0 = never.
    shed_after: float = 5.0
    #: Server processes on this host (PostgreSQL only; each behaves as a replica).
    processes: int = 1
    #: Set by a parent that already migrated the schema before starting processes.
    migrated: bool = False

    def __post_init__(self) -> None:
        self.home = Path(self.home)
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'flux.db'}"

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "home": str(self.home)})

    @classmethod
    def from_json(cls, text: str) -> "ServerSettings":
        return cls(**json.loads(text))

    def lease_interval_for(self, shared: bool) -> float:
        if self.lease_interval is not None:
            return self.lease_interval
        return min(10.0, self.eviction_grace_period / 3) if shared else 300.0

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
