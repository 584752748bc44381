"""A worker's name is its identity: one process holds it at a time.

The server binds a worker name to the session token issued when the worker first
registered: re-registering a name that is online needs that token, so nobody who
merely holds the shared bootstrap token can take over a running worker's claims.
On its own host a worker keeps the token in ``HOME/workers/NAME.token`` (0600), so
a worker restarted after a crash presents it and takes its name back at once,
requeueing what its previous incarnation held, instead of waiting for eviction.

Two processes on one host must not share a name either: the first holds an
exclusive lock on ``HOME/workers/NAME.lock`` for as long as it runs (the kernel
releases it when the process dies, however it dies); a second one exits with a
message instead of fighting the first.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class NameTaken(Exception):
    """Another worker holds this name (here, or on the server)."""


class WorkerIdentity:
    def __init__(self, home: Path, name: str):
        self.folder = Path(home) / "workers"
        self.name = name
        self._lock_fd: int | None = None

    @property
    def token_path(self) -> Path:
        return self.folder / f"{self.name}.token"

    def claim(self) -> None:
        """Hold the name on this host, or raise ``NameTaken``."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.folder / f"{self.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise NameTaken(
                f"worker {self.name!r} is already running on this host"
                f" (it holds {self.folder / (self.name + '.lock')}); "
                "stop it first or choose another name"
            ) from None
        self._lock_fd = fd

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def load_token(self) -> str | None:
        try:
            return self.token_path.read_text().strip() or None
        except OSError:
            return None

    def save_token(self, token: str) -> None:
        temporary = self.token_path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(token)
        os.replace(temporary, self.token_path)
