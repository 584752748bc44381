"""The worker's connections to its server (flux.worker.wire, h11 for the protocol) against a real socket server that
answers as told: keep-alive reuse, the framings, a connection closed while kept, timeouts,
refused connections and error statuses, all as the httpx exceptions the session retries on."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from flux.worker.wire import Httpx, Wire, open_wire


class Server:
    """Answers each request with the next of ``answers`` (raw bytes, or None: close the
    connection without answering); counts connections and keeps the requests it read."""

    def __init__(self, answers: list[bytes | None]):
        self.answers, self.connections, self.requests = list(answers), 0, []

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except asyncio.IncompleteReadError:
            pass
        writer.close()


def synchronously(scenario):  # noqa: ANN001, ANN201 - the tests are coroutines; pytest runs plain functions
    def test() -> None:
        asyncio.run(scenario())

    return test


def ok(body: dict, extra: str = "") -> bytes:
    content = json.dumps(body).encode()
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(content)}\r\n{extra}\r\n".encode() + content


@synchronously
async def test_requests_share_one_kept_alive_connection_and_carry_their_body():
    server = Server([ok({"n": 1}), ok({"n": 2})])
    async with server as url:
        wire = Wire(url, keepalive_expiry=30.0, verify=False)
        first = await wire.request("POST", "/workers/w 1/heartbeat", b'{"a":1}', {"Authorization": "Bearer t"}, 5.0)
        second = await wire.request("POST", "/x", None, {}, 5.0)
        await wire.aclose()
    assert (first.status_code, first.json(), second.json()) == (200, {"n": 1}, {"n": 2})
    assert server.connections == 1
    assert server.requests[0].startswith(b"POST /workers/w%201/heartbeat HTTP/1.1\r\n")
    assert b"Authorization: Bearer t\r\n" in server.requests[0] and server.requests[0].endswith(b'{"a":1}')
    assert b"Content-Length: 0\r\n" in server.requests[1]


@synchronously
async def test_chunked_empty_and_closing_answers_are_read_whole():
    chunked = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
    unframed = b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"b":2}'
    empty = b"HTTP/1.1 204 No Content\r\n\r\n"
    server = Server([chunked, empty, unframed, ok({"c": 3})])
    async with server as url:
        wire = Wire(url, keepalive_expiry=30.0, verify=False)
        answers = [(await wire.request("GET", "/", None, {}, 5.0)).content for _ in range(4)]
        await wire.aclose()
    assert answers == [b'{"a":1}', b"", b'{"b":2}', b'{"c": 3}']
    assert server.connections == 2  # the closing answer ended its connection


@synchronously
async def test_a_kept_connection_the_server_closed_is_retried_once_on_a_new_one():
    server = Server([ok({"n": 1}), None, ok({"n": 2})])
    async with server as url:
        wire = Wire(url, keepalive_expiry=30.0, verify=False)
        await wire.request("POST", "/a", b"{}", {}, 5.0)
        assert (await wire.request("POST", "/b", b"{}", {}, 5.0)).json() == {"n": 2}
        await wire.aclose()
    assert server.connections == 2


@synchronously
async def test_a_fresh_connection_closed_unanswered_is_a_transport_error():
    async with Server([None]) as url:
        with pytest.raises(httpx.TransportError):
            await Wire(url, keepalive_expiry=30.0, verify=False).request("POST", "/a", b"{}", {}, 5.0)


@synchronously
async def test_no_answer_in_time_is_a_read_timeout_and_a_refused_connection_a_connect_error():
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with pytest.raises(httpx.ReadTimeout):
        await Wire(f"http://127.0.0.1:{port}", keepalive_expiry=30.0, verify=False).request("POST", "/", b"{}", {}, 0.2)
    server.close()
    await server.wait_closed()
    with pytest.raises(httpx.ConnectError):
        await Wire(f"http://127.0.0.1:{port}", keepalive_expiry=30.0, verify=False).request("POST", "/", b"{}", {}, 5.0)


@synchronously
async def test_an_error_status_raises_as_httpx_does_with_its_headers():
    busy = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\n{}"
    async with Server([busy]) as url:
        answer = await Wire(url, keepalive_expiry=30.0, verify=False).request("POST", "/a", b"{}", {}, 5.0)
    with pytest.raises(httpx.HTTPStatusError) as raised:
        answer.raise_for_status()
    assert raised.value.response.status_code == 503 and raised.value.response.headers["retry-after"] == "3"
    assert raised.value.request.url.path == "/a"  # the CLI says what was refused by its path ("registration")


@synchronously
async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent():
    wire = Wire("http://127.0.0.1:9", keepalive_expiry=30.0, verify=False)
    with pytest.raises(httpx.LocalProtocolError):
        await wire.request("POST", "/a", b"{}", {"Authorization": "Bearer x\r\nX-Evil: 1"}, 5.0)


def test_a_proxy_in_the_environment_keeps_httpx(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(open_wire("http://127.0.0.1:1", 30.0, False), Wire)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert isinstance(open_wire("http://127.0.0.1:1", 30.0, False), Httpx)
