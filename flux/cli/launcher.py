"""``python -m flux.cli.launcher``: a warm process the ``local`` pool provider forks
``flux start worker`` processes from (docs/autoscaling.md#local).

A worker started as ``python -m flux.cli start worker`` pays for an interpreter and
the engine's imports (~0.5 s of CPU); a pool asked for nine at once on a two-core
host waits seconds before the first registers. This process imports them once, then
forks each worker on request: the worker runs the very same command (``argv``) in a
process of its own session, its output in its log, and registers in a few hundred
ms. The pages it imported stay shared with every worker (``gc.freeze``). A forked
worker would show the launcher's own command line in ``ps``; it takes its own
(``flux start worker NAME ...``) through ``setproctitle``, as gunicorn's and Celery's
forked workers do (argv is C memory Python cannot rewrite by itself).

One JSON line a request on stdin, ``{"argv": [...], "log": PATH}``; one JSON line a
reply on stdout, ``{"pid": N}`` or ``{"error": "..."}``; ``{"ready": true}`` first,
once imported. It stays single-threaded (a fork never copies a held lock) and its
workers are reaped by the kernel. At EOF it exits; its workers live on, as started
ones do (each is stopped by its pid).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shlex
import signal
import sys

import setproctitle


def _warm() -> None:
    """What ``flux start worker`` imports (its child template's modules included)."""
    import flux.cli
    import flux.cli.start
    import flux.worker
    import flux.worker.runners.base
    import flux.worker.runners.child  # what the template imports on its first fork
    import flux.worker.runners.template  # noqa: F401


def _run_worker(argv: list[str], log_fd: int) -> int:
    """In the forked child: become a started worker process, then run ``flux ARGV``."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own fds, for its whole life
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.argv = ["flux", *argv]
    # ps shows this worker ("flux start worker NAME ..."), not the launcher's command line
    setproctitle.setproctitle(shlex.join(sys.argv))
    from flux.cli import main

    try:
        main.main(args=argv, prog_name="flux", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def _spawn(argv: list[str], log: str) -> int:
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _run_worker(argv, log_fd)
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(Exception):  # exiting regardless
                        stream.flush()
                os._exit(code)
        return pid
    finally:
        os.close(log_fd)


def serve() -> None:
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its workers are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C meant for the server is the server's
    gc.freeze()  # the imported objects are never scanned again: their pages stay shared
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            reply = {"pid": _spawn([str(a) for a in request["argv"]], str(request["log"]))}
        except Exception as exc:  # noqa: BLE001 - every failure is the requester's to report
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()
