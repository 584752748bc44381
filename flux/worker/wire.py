"""The worker's HTTP/1.1 client for its own server: keep-alive connections on asyncio
streams, with h11 for the protocol.

An idle worker's CPU is its heartbeat and its claim long poll (docs/footprint.md), and
through httpx's client (httpcore's pool, anyio, then h11) one small request costs ~1.2
ms of CPU. The worker only ever talks to its server, one request at a time per
connection, so it keeps its own few connections and lets h11 (the HTTP/1.1 state
machine httpx itself uses, already loaded with it) write the requests and read the
answers: every framing (``Content-Length``, chunked, read to close), interim answers and
keep-alive rules are h11's, none are parsed here. Failures are httpx's exceptions
(``ConnectError``, ``ReadError``, ``ReadTimeout``, ``HTTPStatusError`` from
``raise_for_status``), so the session's retry rules (``flux.worker.session``) read them
whichever transport sent the call. Behind a proxy (``HTTP(S)_PROXY``) the session keeps httpx, which honours it
(``Httpx``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import h11
import httpx

#: Proxy variables httpx honours: with any of them set the worker keeps httpx.
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
#: Idle connections kept for the next request.
MAX_IDLE = 8
#: How much one read takes from the socket.
READ_SIZE = 65536
_SAFE_PATH = "/:@!$&'()*+,;=-._~%?"


def proxied() -> bool:
    return any(os.environ.get(name) for name in PROXY_VARIABLES)


@dataclass(frozen=True)
class Answer:
    """A reply: what the session reads of an ``httpx.Response``."""

    status_code: int
    headers: dict[str, str]
    content: bytes
    #: The request's method and URL (the path included: the CLI names what was refused by it).
    method: str = "POST"
    url: str = ""

    def json(self) -> Any:
        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            request = httpx.Request(self.method, self.url)
            httpx.Response(
                self.status_code, headers=self.headers, content=self.content, request=request
            ).raise_for_status()


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    protocol: h11.Connection = field(default_factory=lambda: h11.Connection(our_role=h11.CLIENT))
    idle_since: float = field(default_factory=time.monotonic)

    def close(self) -> None:
        self.writer.close()


class _Stale(Exception):
    """A kept-alive connection the server had closed: nothing was answered on it."""


class Wire:
    """Keep-alive connections to one server (``base_url``; set it again to fail over)."""

    def __init__(self, base_url: str, keepalive_expiry: float, verify: bool):
        self.keepalive_expiry = keepalive_expiry
        self._ssl = httpx.create_ssl_context() if verify else None
        self._idle: list[_Connection] = []
        self.base_url = base_url

    @property
    def base_url(self) -> str:
        return self._base

    @base_url.setter
    def base_url(self, url: str) -> None:
        parts = urlsplit(url)
        self._base, self._tls = url.rstrip("/"), parts.scheme == "https"
        self._host, self._port = parts.hostname or "localhost", parts.port or (443 if self._tls else 80)
        self._authority, self._prefix = parts.netloc, parts.path.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._drop_idle()

    async def aclose(self) -> None:
        self._drop_idle()

    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], timeout: float
    ) -> Answer:
        """One exchange (an error status is the caller's to raise); a kept-alive connection the
        server had closed is retried once on a new one."""
        request = self._request(method, path, headers, content)
        try:
            async with asyncio.timeout(timeout):
                connection = self._take()
                if connection is not None:
                    try:
                        return await self._exchange(connection, request, content)
                    except _Stale:
                        pass
                try:
                    return await self._exchange(await self._connect(), request, content)
                except _Stale as exc:
                    raise httpx.RemoteProtocolError("server closed the connection without an answer") from exc
        except TimeoutError:
            raise httpx.ReadTimeout(f"no answer within {timeout:g} s") from None

    def _request(self, method: str, path: str, headers: dict[str, str], content: bytes | None) -> h11.Request:
        fields = [("Host", self._authority), *headers.items()]
        if content is not None or method not in ("GET", "HEAD"):
            fields.append(("Content-Length", str(len(content or b""))))
        try:  # h11 refuses a header or target with a line break before anything is sent
            return h11.Request(method=method, target=f"{self._prefix}{quote(path, safe=_SAFE_PATH)}", headers=fields)
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc

    def _take(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if now - connection.idle_since < self.keepalive_expiry and not connection.reader.at_eof():
                return connection
            connection.close()
        return None

    def _drop_idle(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle = []

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(self._host, self._port, ssl=self._ssl if self._tls else None)
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or exc.__class__.__name__) from exc
        return _Connection(reader, writer)

    async def _exchange(self, connection: _Connection, request: h11.Request, content: bytes | None) -> Answer:
        """Send, read the answer, and keep the connection for the next request when h11
        says both sides allow it; closed on any failure or cancellation."""
        protocol, kept = connection.protocol, False
        try:
            data = protocol.send(request) + (protocol.send(h11.Data(data=content)) if content else b"")
            connection.writer.write(data + protocol.send(h11.EndOfMessage()))
            try:
                await connection.writer.drain()
                response = await self._next(connection, h11.Response)
            except (ConnectionError, h11.RemoteProtocolError) as exc:
                raise _Stale() from exc  # nothing answered: the server had closed it
            body = bytearray()
            try:
                while isinstance(event := await self._next(connection, (h11.Data, h11.EndOfMessage)), h11.Data):
                    body += event.data
            except (ConnectionError, h11.RemoteProtocolError) as exc:
                raise httpx.ReadError(f"reading the answer: {exc.__class__.__name__}") from exc
            if protocol.our_state is h11.DONE and protocol.their_state is h11.DONE and len(self._idle) < MAX_IDLE:
                protocol.start_next_cycle()
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
                kept = True
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in response.headers}
            return Answer(
                response.status_code,
                headers,
                bytes(body),
                request.method.decode(),
                self._origin + request.target.decode(),
            )
        finally:
            if not kept:
                connection.close()

    @staticmethod
    async def _next(connection: _Connection, wanted: type | tuple[type, ...]) -> Any:
        """The next event of one of the ``wanted`` types, reading as h11 needs (interim
        1xx answers are passed over); the peer closing first is a ``ConnectionError``."""
        protocol = connection.protocol
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                protocol.receive_data(await connection.reader.read(READ_SIZE))
            elif isinstance(event, wanted):
                return event
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the server closed the connection")
            elif not isinstance(event, h11.InformationalResponse):
                raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}")


class Httpx:
    """The same interface over httpx, for a worker that must go through a proxy."""

    def __init__(self, base_url: str, keepalive_expiry: float, verify: bool):
        self.client = httpx.AsyncClient(
            base_url=base_url, limits=httpx.Limits(keepalive_expiry=keepalive_expiry), verify=verify
        )

    @property
    def base_url(self) -> str:
        return str(self.client.base_url)

    @base_url.setter
    def base_url(self, url: str) -> None:
        self.client.base_url = url

    async def aclose(self) -> None:
        await self.client.aclose()

    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], timeout: float
    ) -> httpx.Response:
        return await self.client.request(method, path, content=content, headers=headers, timeout=timeout)


def open_wire(base_url: str, keepalive_expiry: float, verify: bool) -> Wire | Httpx:
    """Streams, or httpx where a proxy is configured."""
    return (Httpx if proxied() else Wire)(base_url, keepalive_expiry, verify)
