"""How the server and the worker write their own logs: ``--log-format text|json``.

JSON lines carry, besides time, level, logger and message, the context the line was
written in: ``execution_id``, ``worker`` and ``request_id`` when known, so a fleet's
logs can be shipped to Loki or ELK as they are and joined on those keys. The context
lives in a ContextVar: the server sets it per request (``RequestContext``, which also
answers ``X-Request-ID``), the worker per running execution (``bind``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import re
import sys
import time
from contextvars import ContextVar
from typing import Iterator

FORMATS = ("text", "json")
#: Where ``--log-format`` reaches the processes of ``flux start server --processes N``.
LOG_FORMAT_ENV = "FLUX_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_context: ContextVar[dict[str, str]] = ContextVar("flux_log_context", default={})  # noqa: B039 - never mutated: bind() sets a new dict


@contextlib.contextmanager
def bind(**fields: str | None) -> Iterator[None]:
    """Add fields to the context of every line logged inside the block (and in tasks it starts)."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def bind_process(**fields: str) -> None:
    """Context for the whole process (a worker's name)."""
    _context.set({**_context.get(), **fields})


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **getattr(record, "flux_context", {}),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.flux_context = _context.get()
        return True


def configure_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    """Send the process's logs to stderr as text or JSON lines; httpx's per-request
    lines are kept at WARNING (a heartbeat every few seconds is not news)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(_ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # one format for the whole process
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True


_EXECUTION = re.compile(r"^/executions/([0-9a-fA-F]{1,32})(?:/|$)")
_WORKER = re.compile(r"^/workers/([A-Za-z0-9_.\-]{1,128})/")
_SANE_ID = re.compile(r"[A-Za-z0-9._\-]{1,64}")


class RequestContext:
    """ASGI middleware: each request gets a request id (the caller's ``X-Request-ID``
    when it sends a sane one), and the execution or worker its path names, in the
    context of every line logged while it is served; the id is echoed in the response."""

    def __init__(self, app) -> None:  # noqa: ANN001
        self.app = app

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(b"x-request-id", b"").decode("latin-1")
        # Not uuid4: os.urandom lets go of the GIL, and taking it back on a busy server
        # made every request's event loop wait up to a switch interval. An id needs to
        # be unique in the logs, not unguessable.
        request_id = given if _SANE_ID.fullmatch(given) else f"{random.getrandbits(64):016x}"
        path = scope.get("path", "")
        execution = _EXECUTION.match(path)
        worker = _WORKER.match(path)

        async def send_with_id(message) -> None:  # noqa: ANN001
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        with bind(
            request_id=request_id, execution_id=execution and execution.group(1), worker=worker and worker.group(1)
        ):
            await self.app(scope, receive, send_with_id)
