"""Run the API under uvicorn so that SIGTERM or SIGINT is a clean stop.

On a stop signal uvicorn waits for open requests, then cancels them after its
graceful timeout, logging each as an ERROR with a traceback. A worker's claim and a
client's wait are long polls that would hold out that long, so the signal first
ends them (``long_polls_end_on_stop``): they answer at once with what they have.
The app hooks that onto whatever handler serves it, so it holds in each of the
processes ``--processes N`` starts (uvicorn's process manager builds its own
servers there) as in a single one. uvicorn also re-raises the signal once it has
shut down, which would make a requested stop exit with 143 or 130; here it exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
from types import FrameType
from typing import Callable, Iterator

import uvicorn
from fastapi import FastAPI

from flux.server import edge
from flux.server.database import migrate
from flux.server.settings import SETTINGS_ENV, ServerSettings, ensure_bootstrap_token

#: The signals uvicorn takes as "stop".
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def long_polls_end_on_stop(stop: Callable[[], None]) -> Iterator[None]:
    """While the app runs, a stop signal also calls ``stop`` (on the event loop),
    after the handler in force (uvicorn's, which begins its graceful shutdown).
    Only the main thread can take signals, and only a Python handler can be
    chained; elsewhere (an in-process test client, a host that left the default
    action) this does nothing."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    if threading.current_thread() is not threading.main_thread() or not all(map(callable, previous.values())):
        yield
        return
    loop = asyncio.get_running_loop()

    def on_stop(sig: int, frame: FrameType | None) -> None:
        previous[sig](sig, frame)
        with contextlib.suppress(RuntimeError):  # the loop already closed: nothing is polling
            loop.call_soon_threadsafe(stop)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is on_stop:
                signal.signal(sig, handler)


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    sys.exit(0)


#: Keep-alive outlives the workers' heartbeat interval and their client's keep-alive
#: (30 s), so the server never closes a connection a worker is about to reuse.
#: Long polls end at once on a stop; the graceful timeout only bounds a stuck request.
#: ``log_config=None``: uvicorn keeps the process's logging (``flux.logformat``), so
#: ``--log-format json`` covers its lines too.
OPTIONS = dict(log_level="warning", timeout_graceful_shutdown=3, timeout_keep_alive=75, log_config=None)


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything else is done (migrations, the app):
    an address in use is an ``OSError`` at once, not after a start-up's work."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart reuses a TIME_WAIT port
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class _Announcing(uvicorn.Server):
    """uvicorn's server that calls ``on_ready`` once its socket accepts connections."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None] | None):
        super().__init__(config)
        self.on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_ready is not None:
            self.on_ready()


def serve(
    app: FastAPI, settings: ServerSettings, sock: socket.socket, on_ready: Callable[[], None] | None = None
) -> None:
    """Serve on ``sock`` (from ``listen``) until a stop signal; ``on_ready`` once it listens."""
    # In force before uvicorn takes the signals and after it hands them back (and re-raises).
    for sig in STOP_SIGNALS:
        signal.signal(sig, _exit_cleanly)
    http = edge.install(settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, http=http, **OPTIONS)
    _Announcing(config, on_ready).run(sockets=[sock])


def serve_processes(settings: ServerSettings) -> None:
    """``--processes N`` (PostgreSQL): N server processes on one port under uvicorn's
    process manager, each a replica in every respect. The schema is migrated once,
    here, before they start; each builds its app from the settings left in the
    environment (``flux.server.app.app_from_environment``)."""
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.bootstrap_token = settings.bootstrap_token or ensure_bootstrap_token(settings.home)
    migrate(settings.database_url)
    settings.migrated = True
    os.environ[SETTINGS_ENV] = settings.to_json()
    uvicorn.run(
        "flux.server.app:app_from_environment",
        factory=True,
        workers=settings.processes,
        host=settings.host,
        port=settings.port,
        http=edge.install(settings),
        **OPTIONS,
    )
