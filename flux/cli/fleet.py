"""Setting up a fleet on one host: which bootstrap token ``flux server bootstrap-token``
and ``flux start worker`` mean, and what ``flux start server`` tells once it listens.

A server started with ``--home X`` keeps its token in X; a command run without ``--home``
would look in ``~/.flux``. Rather than make a second token there that no server knows
(the worker would then be refused), both commands read the running servers' run files
(``flux.server.runfiles``) and take the token of the one server they mean, or refuse
and say what to give. A token is made only where no server runs, and that is said.
"""

from __future__ import annotations

import shlex
import socket
from pathlib import Path

import click

from flux.server import runfiles
from flux.server.runfiles import RunFile, TokenSource
from flux.server.settings import ServerSettings, default_home, ensure_bootstrap_token, read_token_file

GIVEN = "was given its bootstrap token as a value (--bootstrap-token or FLUX_BOOTSTRAP_TOKEN): workers need that value"


def _where(server: RunFile) -> str:
    return f"the server on port {server.port} (pid {server.pid}, home {server.home})"


def _token_of(server: RunFile) -> str:
    if server.token_source is TokenSource.GIVEN or server.token_file is None:
        raise click.ClickException(f"{_where(server)} {GIVEN}")
    return read_token_file(server.token_file)


def _one(servers: list[RunFile], what: str) -> RunFile | None:
    """The server meant, where every candidate keeps the same token; None if none runs."""
    if not servers:
        return None
    places = {(s.token_source, s.token_file) for s in servers}
    if len(places) > 1:
        listed = "; ".join(f"port {s.port}: home {s.home}" for s in servers)
        raise click.ClickException(f"several Flux servers run here ({listed}): {what}")
    return servers[0]


def bootstrap_token_for_admin(home: str | None, port: int | None) -> str:
    """``flux server bootstrap-token``: the running server's token (the one on ``port``,
    the one using ``home``), else HOME's, made on first use and said so on stderr."""
    servers = [
        s
        for s in runfiles.running()
        if (port is None or s.port == port) and (home is None or Path(s.home).resolve() == Path(home).resolve())
    ]
    server = _one(servers, "name one with --port or --home")
    if server is not None:
        return _token_of(server)
    if port is not None:
        raise click.ClickException(
            f"no Flux server of yours runs on port {port} on this host: run this on the server's host, "
            "or give the server's --home"
        )
    folder = Path(home) if home else default_home()
    path = ServerSettings(home=folder).bootstrap_token_path
    made = not path.exists()
    token = ensure_bootstrap_token(folder)
    if made:
        which = f"--home {shlex.quote(str(folder))}" if home else "the default --home"
        click.echo(
            f"no running server uses {which}: made a new bootstrap token in {path}; a server started with it uses it",
            err=True,
        )
    return token


def bootstrap_token_for_worker(server_url: str, home: str | None) -> str:
    """``flux start worker`` with no token given: HOME's when ``--home`` names one, else
    that of the server at ``server_url`` when it runs on this host, else ``~/.flux``'s."""
    if home is None:
        local = [s for s in runfiles.running() if any(s.serves(url.strip()) for url in server_url.split(","))]
        server = _one(local, "give --bootstrap-token-file")
        if server is not None:
            return _token_of(server)
    path = ServerSettings(home=Path(home) if home else default_home()).bootstrap_token_path
    if not path.exists():
        looked = "" if home else f"no server of this host serves {server_url}, and "
        raise click.ClickException(
            f"no bootstrap token: none given, {looked}{path} does not exist; give --bootstrap-token-file "
            "(on the server's host, 'flux server bootstrap-token' prints the running server's token)"
        )
    return read_token_file(path)


def run_file(settings: ServerSettings, token_file: str | None, given: bool) -> RunFile:
    import os

    if given:
        source, where = TokenSource.GIVEN, None
    elif token_file:
        source, where = TokenSource.FILE, str(Path(token_file).resolve())
    else:
        source, where = TokenSource.HOME, str(settings.bootstrap_token_path.resolve())
    return RunFile(os.getpid(), settings.host, settings.port, str(settings.home.resolve()), source, where)


def advertised_host(host: str) -> str:
    """The host other machines reach a server on: its name when it listens on every interface."""
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def ready_lines(record: RunFile) -> list[str]:
    """What ``flux start server`` prints once it listens: the console, the token, a worker line."""
    url = f"http://{advertised_host(record.host)}:{record.port}"
    worker = ["flux", "start", "worker", "worker-1", "--server-url", url]
    if record.token_file is not None:
        token = f"bootstrap token: {record.token_file} (flux server bootstrap-token prints it)"
        worker += ["--bootstrap-token-file", record.token_file]
        then = ""
    else:
        token = "bootstrap token: given as a value (--bootstrap-token or FLUX_BOOTSTRAP_TOKEN)"
        then = "   # with FLUX_BOOTSTRAP_TOKEN set to the same value"
    return [f"console: {url}/ui", token, "start a worker: " + shlex.join(worker) + then]
