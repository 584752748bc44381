"""Children forked from a template process instead of started from scratch.

A child started as ``python -m flux.worker.runners.child`` pays for an interpreter and the
engine's imports (~0.25 s of CPU) and keeps ~16 MiB of its own. A child forked from a
process that has imported them already starts in milliseconds and shares those pages
with the worker (copy-on-write): an idle worker with its warm child costs little more
than the worker (docs/footprint.md).

Why a template and not ``os.fork()`` in the worker: by the time the worker needs a
child it runs threads (asyncio's resolver and child watcher), and a fork taken while
another thread holds a lock leaves that lock held for good in the child. The template
is forked once, at start, while the worker still has one thread, and stays
single-threaded: all it does is fork children on request (``spawn``) and report how
they ended. The same design as ``multiprocessing``'s forkserver, with the pages of
the worker shared.

Each child runs ``flux.worker.runners.child`` exactly as a started one would: its own
session (process group), the pipes the runner made as fds 0, 1, 2 and the protocol
channel, the environment the runner chose, and ``PR_SET_PDEATHSIG``: it dies with
the template, which dies with the worker. If the template is gone, the runner starts
each child from scratch, a new interpreter (``ChildTemplate.alive``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Sequence

from flux.worker.runners.lifetime import die_with_parent
from flux.worker.runners.protocol import PARENT_ENV, PROTOCOL_FD_ENV

if TYPE_CHECKING:
    from types import ModuleType

log = logging.getLogger("flux.worker.runners.subprocess")

#: Largest control message (a spawn request carries the child's environment).
MAX_MESSAGE = 1 << 20
#: fds sent with a spawn request: stdin (read end), stdout, stderr, channel (write ends).
SPAWN_FDS = 4


class TemplateGone(Exception):
    """The template process died or was closed: the runner starts each child from scratch."""


class ForkedProcess:
    """A child forked by the template, with what the runner uses of
    ``asyncio.subprocess.Process``: pid, stdin, returncode, wait, kill, terminate."""

    def __init__(self, pid: int, stdin: asyncio.StreamWriter):
        self.pid = pid
        self.stdin = stdin
        self.returncode: int | None = None
        self._exited = asyncio.Event()

    def ended(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is not None:
            raise ProcessLookupError(self.pid)
        os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ChildTemplate:
    """The worker's end of the template process."""

    def __init__(self, pid: int, sock: socket.socket):
        self.pid = pid
        self._sock = sock
        #: Spawn requests sent, oldest first, waiting for their pid; None until the first
        #: (the socket is read from the running loop from then on).
        self._spawning: collections.deque[asyncio.Future[int]] | None = None
        self._children: dict[int, ForkedProcess] = {}
        self._exits: dict[int, int] = {}  # exits read before their child was known
        self.alive = True

    @classmethod
    def fork(cls) -> ChildTemplate | None:
        """Fork the template; call it while this process has one thread (before
        ``asyncio.run``). None where that cannot be (not Linux, threads running)."""
        if not sys.platform.startswith("linux") or threading.active_count() > 1:
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()  # nothing buffered is written twice
        # Objects made so far (the imported modules) are never scanned by the collector
        # again, here or there: its scans would write to their pages and unshare them.
        gc.freeze()
        pid = os.fork()
        if pid == 0:  # the template
            ours.close()
            code = 1
            try:
                _serve(theirs, os.getppid())
                code = 0
            finally:
                os._exit(code)
        theirs.close()
        return cls(pid, ours)

    async def spawn(self, env: dict[str, str], stdout: int, stderr: int, channel: int) -> ForkedProcess:
        """A child with a new stdin pipe and these write ends as its fds 1, 2 and
        protocol channel (the caller closes its copies)."""
        loop = asyncio.get_running_loop()
        if self._spawning is None:
            self._spawning = collections.deque()
            self._sock.setblocking(False)
            loop.add_reader(self._sock.fileno(), self._read)
        if not self.alive:
            raise TemplateGone()
        request = json.dumps({"env": env}).encode()
        stdin_read, stdin_write = os.pipe()
        try:
            started: asyncio.Future[int] = loop.create_future()
            while True:
                try:
                    socket.send_fds(self._sock, [request], [stdin_read, stdout, stderr, channel])
                    break
                except BlockingIOError:  # the template is busy: its buffer is full for a moment
                    await asyncio.sleep(0.001)
                except OSError as exc:
                    self._gone(f"cannot reach the template: {exc}")
                    raise TemplateGone() from exc
            self._spawning.append(started)
        except BaseException:
            os.close(stdin_write)
            raise
        finally:
            os.close(stdin_read)
        try:
            pid = await started
        except BaseException:
            os.close(stdin_write)
            raise
        process = ForkedProcess(pid, await _writer(stdin_write))
        if pid in self._exits:  # it ended before we got here
            process.ended(self._exits.pop(pid))
        else:
            self._children[pid] = process
        return process

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(MAX_MESSAGE)
            except BlockingIOError:
                return
            except OSError as exc:
                self._gone(f"template unreadable: {exc}")
                return
            if not data:
                self._gone("the template process exited")
                return
            message = json.loads(data)
            if "started" in message:
                assert self._spawning is not None
                future = self._spawning.popleft()
                if not future.done():
                    future.set_result(message["started"])
            else:
                pid, returncode = message["exited"], message["returncode"]
                child = self._children.pop(pid, None)
                if child is not None:
                    child.ended(returncode)
                else:
                    self._exits[pid] = returncode

    def _gone(self, why: str) -> None:
        if not self.alive:
            return
        self.alive = False
        log.warning("%s; children are started from scratch from now on", why)
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        while self._spawning:
            future = self._spawning.popleft()
            if not future.done():
                future.set_exception(TemplateGone())
        for child in self._children.values():  # they died with it (PR_SET_PDEATHSIG)
            child.ended(-signal.SIGKILL)
        self._children.clear()

    def close(self) -> None:
        """Stop the template (its children die with it); reap it."""
        if self._spawning is not None and self.alive:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self.alive = False
        self._sock.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


async def _writer(fd: int) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(fd, "wb", buffering=0)
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


# The template's side: a loop that forks children and reports their ends.


def _serve(sock: socket.socket, worker_pid: int) -> None:
    """Fork a child per request; report each child's pid, then its exit status."""
    os.setsid()  # a terminal's Ctrl-C reaches the worker, which drains; not the template
    die_with_parent(worker_pid)
    for signum in (signal.SIGINT, signal.SIGTERM):  # the worker stops it (EOF), or its death
        signal.signal(signum, signal.SIG_IGN)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd is what matters
    template = os.getpid()
    child_process: ModuleType | None = None
    while True:
        ready, _, _ = select.select([sock, wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
            _report_exits(sock)
        if sock in ready:
            try:
                data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, SPAWN_FDS)
            except InterruptedError:
                continue
            if not data:
                return  # the worker closed us: its children were stopped already
            if child_process is None:
                try:
                    child_process = _load_child()
                except BaseException:  # told on the worker's stderr; the worker then starts children itself
                    traceback.print_exc()
                    raise
            try:
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    os.close(wake_read)
                    os.close(wake_write)
                    _become_child(child_process, json.loads(data)["env"], fds, template)
            finally:
                for fd in fds:
                    os.close(fd)
            sock.send(json.dumps({"started": pid}).encode())


def _report_exits(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(json.dumps({"exited": pid, "returncode": os.waitstatus_to_exitcode(status)}).encode())


def _load_child() -> ModuleType:
    """What the children run, the programming model with it: imported by the template
    when the first child is asked for, not by the worker, which runs no workflow code
    and so registers sooner (``child.preload``: the whole model, so that no child
    imports any of it per job); then frozen, so that the collector never writes to those
    pages in a child (docs/footprint.md)."""
    from flux.worker.runners import child

    child.preload()
    gc.freeze()
    return child


def _become_child(child_process: ModuleType, env: dict[str, str], fds: Sequence[int], template: int) -> None:
    """In the forked child: the fds, signals, environment and logging of a started one; never returns."""
    code = 1
    try:
        stdin, stdout, stderr, channel = fds
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        os.dup2(channel, 3)
        os.closerange(4, os.sysconf("SC_OPEN_MAX"))  # the worker's sockets and files are not the child's
        os.setsid()
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter has it
        os.environ.clear()
        os.environ.update({**env, PROTOCOL_FD_ENV: "3", PARENT_ENV: str(template)})
        sys.argv = [child_process.__file__]  # what ``python -m flux.worker.runners.child`` would see
        if sys.path and sys.path[0] != os.getcwd():
            sys.path[0] = os.getcwd()  # ``-m`` puts the working directory first, not a script's folder
        sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115 - fresh streams on the new fds
        sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        root = logging.getLogger()  # the worker's handlers are not the child's: as a fresh process
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        root.setLevel(logging.WARNING)
        child_process.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - told on its stderr, which the runner reads
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        os._exit(code)
