"""Connection hygiene at the HTTP edge, below the app (docs/security.md#connections).

uvicorn bounds idle keep-alive connections (``timeout_keep_alive``) but, with its
httptools parser, nothing else a connection can hold: request headers of any size
(one 128 MB header cost 17 s of CPU), a connection that never sends a request, or
one that sends its head or body a byte at a time (slowloris), and as many open
connections as the process has file descriptors. ``EdgeProtocol`` is uvicorn's
httptools protocol with those four bounds:

- headers (request line included) over ``max_header_size`` bytes: 431, closed;
- headers not complete ``header_timeout`` seconds after the connection opened or the
  request began: 408, closed;
- a body not complete ``body_timeout`` seconds after its headers: 408, closed (the
  app sees a disconnect);
- a connection past ``max_connections`` open at once: 503 with ``Retry-After``, closed
  as soon as it is accepted.

A small protocol layer rather than another server: uvicorn's httptools parser is the
fastest the server can use (docs/footprint.md), its stop handling is what
``flux.server.serve`` builds on, and each bound is a few lines on its parser callbacks.
Time spent in the app (a long poll) is never bounded here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import resource
from dataclasses import asdict, dataclass
from http import HTTPStatus

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from flux.server.settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEADER_SIZE,
    ServerSettings,
)

log = logging.getLogger("flux.server.edge")

#: Where the limits reach the protocol, in this process and those ``--processes N`` spawns.
EDGE_ENV = "FLUX_SERVER_EDGE_JSON"
#: File descriptors kept for the database, logs and bundles besides connections.
RESERVED_FDS = 256


@dataclass(frozen=True)
class ConnectionLimits:
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    @classmethod
    def of(cls, settings: ServerSettings) -> "ConnectionLimits":
        return cls(settings.max_header_size, settings.header_timeout, settings.body_timeout, settings.max_connections)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    def within_descriptors(self) -> "ConnectionLimits":
        """The connection cap, lowered to what this process's descriptors can hold
        once their soft limit is raised to the hard one."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        if soft == resource.RLIM_INFINITY or self.max_connections + RESERVED_FDS <= soft:
            return self
        log.warning(
            "max connections lowered from %d to %d: this process may open %d files",
            self.max_connections,
            soft - RESERVED_FDS,
            soft,
        )
        return ConnectionLimits(**{**asdict(self), "max_connections": max(1, soft - RESERVED_FDS)})


def install(settings: ServerSettings) -> str:
    """Hand the settings' limits to every server process; returns uvicorn's ``http`` setting."""
    os.environ[EDGE_ENV] = ConnectionLimits.of(settings).within_descriptors().to_json()
    current_limits.cache_clear()
    return f"{__name__}:EdgeProtocol"


@functools.cache
def current_limits() -> ConnectionLimits:
    text = os.environ.get(EDGE_ENV)
    return ConnectionLimits(**json.loads(text)) if text else ConnectionLimits()


#: The error shape's machine code of each refusal (docs/security.md).
CODES = {408: "request_timeout", 431: "headers_too_large", 503: "overloaded"}


def refusal(status: int, detail: str, retry_after: int | None = None) -> bytes:
    """A complete response in the API's error shape, with ``connection: close``."""
    body = json.dumps({"detail": detail, "code": CODES[status]}).encode()
    head = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ] + ([f"retry-after: {retry_after}"] if retry_after else [])
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class EdgeProtocol(HttpToolsProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.limits = current_limits()
        self.deadline: asyncio.TimerHandle | None = None
        self.in_body = False
        self.head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self.refuse(
                503,
                f"the server holds its limit of {self.limits.max_connections} connections; try again",
                retry_after=1,
            )
            return
        self.arm(self.limits.header_timeout, "request headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.in_body:
            self.head_bytes += len(data)
        super().data_received(data)
        if not self.in_body and self.head_bytes > self.limits.max_header_size and not self.transport.is_closing():
            self.refuse(
                431, f"request headers larger than {self.limits.max_header_size} bytes (the server's max_header_size)"
            )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.deadline is None:
            self.arm(self.limits.header_timeout, "request headers")

    def on_headers_complete(self) -> None:
        self.disarm()
        self.head_bytes, self.in_body = 0, True
        super().on_headers_complete()
        self.arm(self.limits.body_timeout, "request body")

    def on_message_complete(self) -> None:
        self.disarm()
        self.in_body = False
        super().on_message_complete()

    def arm(self, seconds: float, what: str) -> None:
        self.disarm()
        self.deadline = self.loop.call_later(seconds, self.expire, f"{what} not received within {seconds:g} s")

    def disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def expire(self, detail: str) -> None:
        self.deadline = None
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app's receive() answers http.disconnect
            self.cycle.message_event.set()
            if self.cycle.response_started:
                self.transport.close()
                return
        self.refuse(408, detail)

    def refuse(self, status: int, detail: str, retry_after: int | None = None) -> None:
        self.disarm()
        if not self.transport.is_closing():
            self.transport.write(refusal(status, detail, retry_after))
            self.transport.close()
