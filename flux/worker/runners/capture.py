"""What a job prints and logs, captured inside a subprocess-runner child (docs/logs.md).

Python-level output is captured here, where the running task is known
(``current_task()``, which follows sync tasks into their threads): ``sys.stdout`` and
``sys.stderr`` become line writers, and a handler on the root logger turns records
into ``log`` lines. Lines leave as ``LOG`` messages on the protocol channel: a line
after a quiet spell at once (a child that crashes right after it loses nothing), a
burst in batches (100 lines, or 50 ms after the first), and always before the next
event, so a line written before an event reaches the worker before that event.

Bytes written to fds 1 and 2 (C extensions, subprocesses, ``sys.__stdout__``) are
not seen here: the runner reads those pipes itself. When the attempt closes, the
child flushes its partial lines and writes the job's output mark to both fds, so the
runner knows when it has read all of them (``OUTPUT_MARK``).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import threading
import time
from typing import IO

from flux.model.runtime import current_task
from flux.worker.runners.protocol import LOG, MARK_PREFIX, MAX_LINE, OUTPUT_MARK, log_line, split_long

#: A batch of log lines leaves when it holds this many lines or characters...
BATCH_LINES = 100
BATCH_CHARS = 256 * 1024
#: ... or this many seconds after its first line.
BATCH_SECONDS = 0.05


def _task_id() -> str | None:
    call = current_task()
    return call.task_id if call is not None else None


def _clean(text: str) -> str:
    """Lone surrogates (undecodable bytes a user printed) cannot be stored as UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


class Channel:
    """The child's end of the protocol: one JSON line per message, one writer at a time.

    Threads write log lines (sync tasks run in threads) while the event loop writes
    events; the write lock keeps every JSON line whole. A process forked from the
    child (``multiprocessing``) must never write here: its lines go to its fds 1/2,
    which the runner captures like any subprocess's output.
    """

    def __init__(self, file: IO[str]):
        self._file = file
        self._pid = os.getpid()
        self._write = threading.RLock()
        self._lock = threading.Lock()
        self._lines: list[dict] = []
        self._chars = 0
        self._last_sent = 0.0
        self._wake = threading.Event()
        #: Started by the first line that waits for its batch: a job that logs nothing runs no thread for it.
        self._ticker: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._forked)

    def threads(self) -> int:
        """Threads the channel runs (its batching thread, once started)."""
        return 0 if self._ticker is None else 1

    @property
    def forked(self) -> bool:
        return os.getpid() != self._pid

    def send(self, message: dict) -> None:
        """An event or a control message, after the log lines written before it."""
        if self.forked:
            return
        with self._write:
            self._send_lines()
            self._file.write(json.dumps(message) + "\n")
            self._file.flush()

    def log(self, line: dict) -> None:
        if self.forked:
            with contextlib.suppress(OSError):
                os.write(1 if line["stream"] == "stdout" else 2, (line["message"] + "\n").encode("utf-8", "replace"))
            return
        with self._lock:
            self._lines.append(line)
            self._chars += len(line["message"])
            full = len(self._lines) >= BATCH_LINES or self._chars >= BATCH_CHARS
            first = len(self._lines) == 1
            quiet = first and time.monotonic() - self._last_sent >= BATCH_SECONDS
            if first and not (full or quiet) and self._ticker is None:
                self._ticker = threading.Thread(target=self._tick, name="flux-log-batch", daemon=True)
                self._ticker.start()
        if full or quiet:
            self.flush()
        elif first:
            self._wake.set()

    def flush(self) -> None:
        if not self.forked:
            with self._write:
                self._send_lines()

    def _send_lines(self) -> None:
        """Holding the write lock: the waiting lines, as one ``LOG`` message."""
        with self._lock:
            lines, self._lines, self._chars = self._lines, [], 0
        if lines:
            self._last_sent = time.monotonic()
            self._file.write(json.dumps({"type": LOG, "lines": lines}) + "\n")
            self._file.flush()

    def _tick(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            time.sleep(BATCH_SECONDS)
            with contextlib.suppress(Exception):  # a closed channel: the child is exiting
                self.flush()

    def _forked(self) -> None:
        # another thread may have held these at the fork: they would never be released
        self._write, self._lock, self._lines = threading.RLock(), threading.Lock(), []
        # nor may it hold the channel open after the child is gone (the runner waits for EOF)
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._file.fileno(), inheritable=False)
            os.close(null)


class LineWriter(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` in the child: each complete line becomes a log
    line of the task that wrote it. Partial lines are kept per task, so tasks printing
    from threads at once do not mix their words; they are flushed when the attempt
    closes. ``fileno()`` and ``buffer`` are the real fd's (captured as fd output)."""

    def __init__(self, stream: str, original: IO[str], channel: Channel):
        super().__init__()
        self.stream = stream
        self._original = original
        self._channel = channel
        self._partial: dict[str | None, str] = {}
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # the parent's partial lines are the parent's; its lock may have been held at the fork
        self._partial, self._lock = {}, threading.Lock()

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        task_id = _task_id()
        with self._lock:  # held while sending: lines of one stream keep their order
            *lines, rest = (self._partial.pop(task_id, "") + text).split("\n")
            if len(rest) >= MAX_LINE:  # a line that never ends is sent in pieces
                lines.append(rest)
                rest = ""
            if rest:
                self._partial[task_id] = rest
            for line in lines:
                self._send(line, task_id)
        return len(text)

    def finish(self) -> None:
        """The partial lines, as lines of their own."""
        with self._lock:
            partial, self._partial = self._partial, {}
            for task_id, rest in partial.items():
                self._send(rest, task_id)

    def _send(self, line: str, task_id: str | None) -> None:
        for part in split_long(_clean(line)):
            self._channel.log(log_line(self.stream, part, task_id))

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        """User code closing ``sys.stdout`` must not close it for the jobs that follow."""
        self.finish()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._original.fileno()

    @property
    def buffer(self):  # noqa: ANN201 - binary writes go to the fd, captured by the runner
        return self._original.buffer

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "strict"

    @property
    def line_buffering(self) -> bool:
        return True


class CaptureHandler(logging.Handler):
    """Root-logger handler: every record that propagates becomes a ``log`` line, with
    its level, logger name and, when it has one, the exception's traceback."""

    def __init__(self, channel: Channel):
        super().__init__()
        self.channel = channel
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = _clean(self.format(record))
        except Exception:  # noqa: BLE001 - a bad format string must not break the task
            self.handleError(record)
            return
        for part in split_long(message):
            self.channel.log(log_line("log", part, _task_id(), record.levelname, record.name))


class Capture:
    """The child's capture, installed once and kept across the jobs it serves."""

    def __init__(self, channel: Channel, marked_fds: tuple[int, ...]):
        self.channel = channel
        #: The fds the runner reads as pipes, where the output mark goes.
        self.marked_fds = marked_fds
        self.writers = (LineWriter("stdout", sys.stdout, channel), LineWriter("stderr", sys.stderr, channel))
        self._level_set = False

    def install(self) -> None:
        """Python-level streams and the logging handler; again before each job, in case
        the user's code removed the handler (``basicConfig(force=True)``)."""
        sys.stdout, sys.stderr = self.writers
        root = logging.getLogger()
        if not any(isinstance(handler, CaptureHandler) for handler in root.handlers):
            root.addHandler(CaptureHandler(self.channel))
        if not self._level_set:  # INFO and up, unless the user's code chose a level since
            self._level_set = True
            if root.level == logging.WARNING:
                root.setLevel(logging.INFO)

    def finish(self, mark: str | None) -> None:
        """The attempt closes: send partial lines, then mark the fds and say so."""
        for writer in self.writers:
            writer.finish()
        if mark is None:
            self.channel.flush()
            return
        marked = []
        for original, fd in ((sys.__stdout__, 1), (sys.__stderr__, 2)):
            with contextlib.suppress(Exception):
                original.flush()  # bytes buffered in Python reach the pipe before the mark
            if fd in self.marked_fds:
                with contextlib.suppress(OSError):
                    os.write(fd, MARK_PREFIX + mark.encode() + b"\n")
                    marked.append(fd)
        self.channel.send({"type": OUTPUT_MARK, "mark": mark, "fds": marked})
