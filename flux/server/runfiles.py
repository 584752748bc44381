"""Run files: how commands on the server's host find a running server (its port, its home,
where its bootstrap token is), as Jupyter's ``jpserver-PID.json`` files do.

``flux start server`` writes ``~/.flux/run/server-PID.json`` (0600) once it listens and
removes it when it stops; a file whose process is gone is stale and is removed by the
next reader. The folder is the user's, whatever ``--home`` the server was given: that is
the point, ``flux server bootstrap-token`` without ``--home`` must find a server started
with one. A run file never holds a token, only where the token is.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil


class TokenSource(str, enum.Enum):
    """Where the server took its bootstrap token from."""

    HOME = "home"  #: HOME/bootstrap-token, made on first start
    FILE = "file"  #: --bootstrap-token-file
    GIVEN = "given"  #: --bootstrap-token or FLUX_BOOTSTRAP_TOKEN: in no file a command could read


@dataclass(frozen=True)
class RunFile:
    pid: int
    host: str
    port: int
    home: str
    token_source: TokenSource
    #: The file holding the bootstrap token (None when it was given as a value).
    token_file: str | None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else ("[::1]" if self.host == "::" else self.host)
        return f"http://{host}:{self.port}"

    def serves(self, server_url: str) -> bool:
        """Whether ``server_url`` names this server (its port, on this host)."""
        parts = urlsplit(server_url if "://" in server_url else f"http://{server_url}")
        local = parts.hostname in ("127.0.0.1", "localhost", "::1", self.host)
        return local and (parts.port or 80) == self.port


def run_dir() -> Path:
    return Path.home() / ".flux" / "run"


def write(record: RunFile) -> Path:
    """Leave ``record`` for other commands; returns the file to remove at stop."""
    folder = run_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"server-{record.pid}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({**asdict(record), "token_source": record.token_source.value}, handle)
    return path


def remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def running() -> list[RunFile]:
    """The servers running on this host as this user, by their run files (stale ones removed)."""
    found = []
    for path in sorted(run_dir().glob("server-*.json")):
        try:
            data = json.loads(path.read_text())
            record = RunFile(**{**data, "token_source": TokenSource(data["token_source"])})
        except (OSError, ValueError, TypeError, KeyError):
            continue  # being written, or not ours to read
        if _alive(record.pid, path):
            found.append(record)
        else:
            remove(path)
    return found


def _alive(pid: int, path: Path) -> bool:
    """Its process runs, and is not a later one that was given the same pid."""
    try:
        return psutil.Process(pid).create_time() <= path.stat().st_mtime + 1
    except (psutil.Error, OSError):
        return False
