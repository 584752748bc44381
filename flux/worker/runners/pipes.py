"""The runner's end of a subprocess child: its pipes, and where its output goes.

The subprocess runner owns the child's file descriptors:

* fd 0: the pipe jobs go down;
* fd 1 and fd 2: pipes the runner reads, so that bytes written by C extensions and by
  the processes a task starts (``os.system``, ``subprocess.run``) become ``stdout`` /
  ``stderr`` log lines, with task_id null (the process cannot tell which task wrote
  them) and ``time`` taken when the runner read them;
* the protocol channel (``flux.worker.runners.protocol``): a pipe of its own, passed to the
  child with ``pass_fds``, so nothing written to fds 1/2 can ever reach it. A ``docker
  run`` client cannot pass one: there the channel is its stdout, fd 1 in the container
  joins fd 2, and fd 2 is read as ``stderr``.

The pipes are made here, not by asyncio's subprocess transport: its ``wait()`` waits
for every pipe it made to close, and a process a task started may hold fd 1 long
after the child died.

A child serves several jobs in turn, so a line read from fds 1/2 belongs to the job
the child runs when it is read (``Child.sink``); between jobs it goes to the worker's
own stderr. When an attempt closes, the child writes the job's output mark to each fd
and says so on the channel (``OUTPUT_MARK``): the runner reads each pipe up to that
mark before it reports the closing event, so a job's last bytes reach the worker
before its attempt ends and are never taken for the next job's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from typing import Sequence

from flux.worker.runners.protocol import (
    MARK_PREFIX,
    MAX_EVENT_BYTES,
    MAX_LINE,
    PROTOCOL_FD_ENV,
    LogSink,
    log_line,
    split_long,
)
from flux.worker.runners.template import ChildTemplate, ForkedProcess, TemplateGone

log = logging.getLogger("flux.worker.runners.subprocess")

#: Bytes read from an output pipe at a time.
CHUNK = 64 * 1024
#: After a child is gone, how long its pipes may stay silent before the runner stops
#: waiting for their EOF (a process the job started may hold them open), and how long
#: it waits at most (one that keeps writing).
DRAIN_IDLE = 1.0
DRAIN_MOST = 30.0


class OutputPipe:
    """One of a child's fds 1/2, read to EOF as lines of one stream."""

    def __init__(
        self, fd: int, stream: str, reader: asyncio.StreamReader, transport: asyncio.BaseTransport, child: Child
    ):
        self.fd, self.stream, self.transport, self.child = fd, stream, transport, child
        #: The last output mark read on this pipe.
        self.mark: str | None = None
        self.closed = False
        #: Loop time of the last bytes read or delivered, and whether a delivery is waiting.
        self.active_at = asyncio.get_running_loop().time()
        self.delivering = False
        self._changed = asyncio.Event()
        self.task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        rest = b""
        try:
            while chunk := await reader.read(CHUNK):
                self.active_at = asyncio.get_running_loop().time()
                *complete, rest = (rest + chunk).split(b"\n")
                if len(rest) >= MAX_LINE:  # a line that never ends is sent in pieces
                    complete.append(rest)
                    rest = b""
                await self._lines(complete)
            if rest:  # the partial last line of a child that died
                await self._lines([rest])
        finally:
            self.closed = True
            self._changed.set()

    async def _lines(self, raws: list[bytes]) -> None:
        lines: list[dict] = []
        for raw in raws:
            at = raw.find(MARK_PREFIX)
            if at >= 0:  # what came before the mark (a partial line) is the job's
                if at:
                    lines.append(log_line(self.stream, raw[:at].decode("utf-8", "replace")))
                if lines:
                    await self._deliver(lines)
                    lines = []
                self.mark = raw[at + len(MARK_PREFIX) :].decode("ascii", "replace")
                self._changed.set()
            else:
                lines.extend(log_line(self.stream, piece.decode("utf-8", "replace")) for piece in split_long(raw))
        if lines:
            await self._deliver(lines)

    async def _deliver(self, lines: list[dict]) -> None:
        self.delivering = True
        try:
            await self.child.deliver(lines)
        finally:
            self.delivering = False
            self.active_at = asyncio.get_running_loop().time()

    def idle_for(self, now: float) -> float:
        """Seconds this open pipe has waited for bytes (0 while it waits on the sink)."""
        return 0.0 if self.delivering else now - self.active_at

    async def reached(self, mark: str) -> None:
        """Until this pipe has delivered everything written before ``mark`` (or closed)."""
        while self.mark != mark and not self.closed:
            self._changed.clear()
            await self._changed.wait()

    def close(self) -> None:
        self.task.cancel()
        self.transport.close()


class Child:
    """A child process, its protocol channel and its output pipes."""

    def __init__(
        self,
        process: asyncio.subprocess.Process | ForkedProcess,
        channel: asyncio.StreamReader,
        transport: asyncio.BaseTransport | None,
    ):
        self.process = process
        self.channel = channel
        self._channel_transport = transport
        self.pipes: list[OutputPipe] = []
        #: The running job's log sink; None between jobs.
        self.sink: LogSink | None = None
        #: The sha256 of the workflow bundle it imported: the only one it may run.
        self.bundle: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def deliver(self, lines: list[dict]) -> None:
        """To the running job (awaiting it is the back-pressure), else the worker's stderr."""
        if self.sink is not None:
            try:
                await self.sink(lines)
            except Exception:  # noqa: BLE001 - a pipe nobody reads would block the child for good
                log.exception("child %s: log sink failed; %d line(s) dropped", self.pid, len(lines))
            return
        with contextlib.suppress(Exception):
            sys.stderr.write("".join(line["message"] + "\n" for line in lines))
            sys.stderr.flush()

    async def reached(self, mark: str, fds: Sequence[int], timeout: float) -> None:
        """Read each marked pipe up to ``mark``; a pipe the job redirected elsewhere
        (the mark never comes) holds the attempt's end up to ``timeout`` seconds."""
        waits = [pipe.reached(mark) for pipe in self.pipes if pipe.fd in fds]
        if waits:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waits), timeout)

    async def drained(self, idle: float = DRAIN_IDLE, most: float = DRAIN_MOST) -> None:
        """The child is gone: wait for its last words, to EOF, unless a process it started
        holds the pipes (silent for ``idle`` seconds, or past ``most``). Waiting on the sink
        (back-pressure) is not silence. The pipes are then still read, in the background,
        to EOF: whatever comes later is no job's (``sink`` None), and a process that
        outlived the child never dies of a broken pipe."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + most
        while (open_pipes := [pipe for pipe in self.pipes if not pipe.task.done()]) and loop.time() < deadline:
            await asyncio.wait([pipe.task for pipe in open_pipes], timeout=idle)
            if all(pipe.idle_for(loop.time()) >= idle for pipe in open_pipes if not pipe.task.done()):
                return

    def close(self) -> None:
        """Stop reading (the worker is closing its runner)."""
        for pipe in self.pipes:
            pipe.close()
        if self._channel_transport is not None:
            self._channel_transport.close()


async def _reader(fd: int, limit: int = 2**16) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    reader = asyncio.StreamReader(limit=limit)
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader, transport


async def spawn(
    command: Sequence[str], env: dict[str, str], own_channel: bool = True, template: ChildTemplate | None = None
) -> Child:
    """Start a child in a session of its own, with the pipes above: forked by
    ``template`` when one is alive (``flux.worker.runners.template``), else ``command`` started
    (``own_channel`` False: the channel is its stdout, as a ``docker run`` client needs)."""
    stderr = os.pipe()
    stdout = os.pipe() if own_channel else None
    channel = os.pipe() if own_channel else None
    pairs = [pair for pair in (stderr, stdout, channel) if pair is not None]
    process: asyncio.subprocess.Process | ForkedProcess | None = None
    try:
        if channel is not None and stdout is not None and template is not None and template.alive:
            with contextlib.suppress(TemplateGone):  # gone: started from scratch, below
                process = await template.spawn(env, stdout[1], stderr[1], channel[1])
        if process is None and channel is not None and stdout is not None:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=stdout[1],
                stderr=stderr[1],
                pass_fds=(channel[1],),
                start_new_session=True,
                env={**env, PROTOCOL_FD_ENV: str(channel[1])},
            )
        elif process is None:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr[1],
                limit=MAX_EVENT_BYTES,
                start_new_session=True,
                env=env,
            )
    except BaseException:
        for read_end, _ in pairs:
            os.close(read_end)
        raise
    finally:
        for _, write_end in pairs:  # the child holds them now: EOF comes when it (and its own) close them
            os.close(write_end)
    if channel is not None:
        child = Child(process, *await _reader(channel[0], MAX_EVENT_BYTES))
    else:
        assert isinstance(process, asyncio.subprocess.Process) and process.stdout is not None
        child = Child(process, process.stdout, None)
    for fd, stream, pair in ((1, "stdout", stdout), (2, "stderr", stderr)):
        if pair is not None:
            pipe_reader, transport = await _reader(pair[0])
            child.pipes.append(OutputPipe(fd, stream, pipe_reader, transport, child))
    return child
