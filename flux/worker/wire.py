"""The worker's HTTP/1.1 client for its own server: keep-alive connections on asyncio
streams, nothing else.

An idle worker's CPU is its heartbeat and its claim long poll (docs/footprint.md), and
through httpx (httpcore, anyio, h11) one small request costs ~1.2 ms of CPU where the
same exchange on a stream costs ~0.1 ms. The worker only ever talks to its server, with
JSON bodies of known length, so this speaks just that much HTTP: a request with
``Content-Length``, a reply with ``Content-Length``, chunked, or read to its end. Failures
are httpx's exceptions (``ConnectError``, ``ReadError``, ``ReadTimeout``,
``HTTPStatusError`` from ``raise_for_status``), so the session's retry rules
(``flux.worker.session``) read them as before. Behind a proxy (``HTTP(S)_PROXY``) the
session keeps httpx, which honours it (``Httpx``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

#: Proxy variables httpx honours: with any of them set the worker keeps httpx.
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
#: Idle connections kept for the next request.
MAX_IDLE = 8
_SAFE_PATH = "/:@!$&'()*+,;=-._~%?"


def proxied() -> bool:
    return any(os.environ.get(name) for name in PROXY_VARIABLES)


@dataclass(frozen=True)
class Answer:
    """A reply: what the session reads of an ``httpx.Response``."""

    status_code: int
    headers: dict[str, str]
    content: bytes
    #: The request's method and URL, for an error's message.
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
            httpx.Response(self.status_code, headers=self.headers, content=self.content, request=request).raise_for_status()


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
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
        self._drop_idle()

    async def aclose(self) -> None:
        self._drop_idle()

    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], timeout: float
    ) -> Answer:
        """One exchange (an error status is the caller's to raise); a kept-alive connection the server had closed is retried once on a new one."""
        head = self._head(method, path, headers, content)
        try:
            async with asyncio.timeout(timeout):
                connection = self._take()
                if connection is not None:
                    try:
                        return await self._exchange(connection, head, content, method)
                    except _Stale:
                        pass
                try:
                    return await self._exchange(await self._connect(), head, content, method)
                except _Stale as exc:
                    raise httpx.RemoteProtocolError("server closed the connection without an answer") from exc
        except TimeoutError:
            raise httpx.ReadTimeout(f"no answer within {timeout:g} s") from None

    def _head(self, method: str, path: str, headers: dict[str, str], content: bytes | None) -> bytes:
        lines = [f"{method} {self._prefix}{quote(path, safe=_SAFE_PATH)} HTTP/1.1", f"Host: {self._authority}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if content is not None or method not in ("GET", "HEAD"):
            lines.append(f"Content-Length: {len(content or b'')}")
        if any("\r" in line or "\n" in line for line in lines):
            raise httpx.LocalProtocolError("a header or the path holds a line break")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

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
            reader, writer = await asyncio.open_connection(
                self._host, self._port, ssl=self._ssl if self._tls else None, limit=2**20
            )
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or exc.__class__.__name__) from exc
        return _Connection(reader, writer)

    async def _exchange(self, connection: _Connection, head: bytes, content: bytes | None, method: str) -> Answer:
        """Send, read the answer, and keep the connection for the next request when both
        sides allow it; closed on any failure or cancellation."""
        kept = False
        try:
            try:
                connection.writer.write(head + content if content else head)
                await connection.writer.drain()
                status, headers = await self._read_head(connection.reader)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                raise _Stale() from exc
            try:
                bodiless = status in (204, 304)
                content, reusable = (b"", True) if bodiless else await self._read_body(connection.reader, headers)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
                raise httpx.ReadError(f"reading the answer: {exc.__class__.__name__}") from exc
            if reusable and headers.get("connection", "").lower() != "close" and len(self._idle) < MAX_IDLE:
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
                kept = True
            return Answer(status, headers, content, method, self._base)
        finally:
            if not kept:
                connection.close()

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
        try:
            while True:
                lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                status = int(lines[0].split(" ", 2)[1])
                if status >= 200 or status == 101:  # an interim 1xx answer precedes the real one
                    break
        except (asyncio.LimitOverrunError, ValueError, IndexError) as exc:
            raise httpx.RemoteProtocolError(f"malformed answer: {exc.__class__.__name__}") from exc
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        return status, headers

    @staticmethod
    async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> tuple[bytes, bool]:
        """The body, and whether the connection may carry another request."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                        pass
                    return b"".join(chunks), True
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
        if "content-length" in headers:
            return await reader.readexactly(int(headers["content-length"])), True
        return await reader.read(), False


class Httpx:
    """The same interface over httpx, for a worker that must go through a proxy."""

    def __init__(self, base_url: str, keepalive_expiry: float, verify: bool):
        self.client = httpx.AsyncClient(base_url=base_url, limits=httpx.Limits(keepalive_expiry=keepalive_expiry), verify=verify)

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
