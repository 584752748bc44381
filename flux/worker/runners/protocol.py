"""What the worker and its subprocess children say to each other besides events.

Jobs go down as one JSON line each on the child's stdin (a ``flux.worker.runners.base.Job``,
which the child decodes back). Everything the child says
comes back as JSON lines on the protocol channel: a pipe of its own, passed as the
file descriptor named by ``PROTOCOL_FD_ENV`` (a ``docker run`` client cannot pass one:
there the channel is the child's original stdout). Messages on it:

* events (``WORKFLOW_STARTED``, ``TASK_COMPLETED``, ...): go to the event log;
* ``LOG`` ``{"lines": [...]}``: log lines the child captured at the Python level
  (``sys.stdout``, ``sys.stderr``, ``logging``); never events, never checkpointed;
* ``OUTPUT_MARK`` ``{"mark", "fds"}``: the child wrote the job's output mark to these
  file descriptors (below); sent just before the event that closes the attempt;
* ``CHILD_IDLE``: the child can take another job.

Besides jobs and answers (``flux.worker.runners.asking``), one more line goes down on the
child's stdin: ``PREEMPT`` ``{"execution_id", "by", "seconds"}``, a preemption notice the
workflow sees as ``flux.current_task().preempting`` (docs/contention.md), or
``{"execution_id", "withdrawn": true}`` when it is called off (``preempting`` is None again).

The child's fds 1 and 2 are pipes the runner reads (``flux.worker.runners.pipes``): bytes a
C extension or a subprocess writes there become ``stdout``/``stderr`` lines. Nothing
written there can reach the protocol channel.
"""

from __future__ import annotations

import time
from typing import AnyStr, Awaitable, Callable

#: The environment variable that tells a child its worker's pid.
PARENT_ENV = "FLUX_WORKER_PID"
#: The environment variable that names the protocol channel's fd in a child.
PROTOCOL_FD_ENV = "FLUX_PROTOCOL_FD"

#: The control line a child writes when it can take another job.
IDLE = {"type": "CHILD_IDLE"}
#: Message types on the protocol channel that are not events.
LOG = "LOG"
OUTPUT_MARK = "OUTPUT_MARK"
#: The worker's preemption notice, on the child's stdin.
PREEMPT = "PREEMPT"

#: Written by the child to fds 1 and 2, followed by the job's mark and a newline, when
#: its attempt closes: once the runner has read it on a pipe, it has read every byte
#: the job wrote there before. A NUL byte keeps it out of anything people print.
MARK_PREFIX = b"\x00flux-output-mark:"

#: Longest protocol line (an event, a job) accepted on either side: above the largest
#: payload limit a server accepts (``MAX_PAYLOAD_SIZE_CEILING``), so the payload limit,
#: checked in the child with a clear message, is always the one that applies (a buffer
#: cap, not an allocation).
MAX_EVENT_BYTES = 1024**3

#: Longest log line, in characters (child) or bytes (pipes); a longer one is split.
MAX_LINE = 64 * 1024

#: Where a runner hands the log lines it captured; awaiting it is the back-pressure.
LogSink = Callable[[list[dict]], Awaitable[None]]


def log_line(
    stream: str, message: str, task_id: str | None = None, level: str | None = None, logger: str | None = None
) -> dict:
    """One captured line as docs/logs.md shapes it (``time`` is when it was captured)."""
    return {
        "time": time.time(),
        "stream": stream,
        "task_id": task_id,
        "level": level,
        "logger": logger,
        "message": message,
    }


def split_long(text: AnyStr) -> list[AnyStr]:
    """A line longer than ``MAX_LINE`` as several, so no message can swell a protocol line."""
    return [text[i : i + MAX_LINE] for i in range(0, len(text), MAX_LINE)] or [text[:0]]
