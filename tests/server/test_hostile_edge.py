"""Connection hygiene at the edge (flux/server/edge.py, docs/security.md#connections),
against a real server process: header size (431), header and body deadlines (408,
slowloris), the connection cap (503), and a 405's full ``Allow``. Each attack is
followed by health probes that must all be answered. How fast is a figure, not
asserted here: ``bench.b17_hostile`` times ``/health`` after each hostile input and
under 2,000 (200 quick) slow-header connections, and when the server closed them."""

from __future__ import annotations

import select
import socket
import time
from contextlib import ExitStack
from urllib.parse import urlsplit

import httpx
import pytest
from waiting import eventually

from flux.local import LocalCluster

TIMEOUT = 2.0  # the header and body deadlines these servers run with
EDGE = ("--header-timeout", str(TIMEOUT), "--body-timeout", str(TIMEOUT), "--max-connections", "300")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("edge") / "home", server_args=EDGE) as cluster:
        cluster.start_server()
        yield cluster


def connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    return sock


def answer(sock: socket.socket) -> str:
    """What the server sent before it closed the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def health_ms(url: str, count: int = 20) -> list[float]:
    times = []
    with httpx.Client(base_url=url, timeout=5) as http:
        for _ in range(count):
            started = time.perf_counter()
            assert http.get("/health").status_code == 200
            times.append((time.perf_counter() - started) * 1000)
    return times


def assert_healthy(url: str) -> None:
    """Twenty probes in a row, each answered 200 (health_ms asserts it) on one connection."""
    assert len(health_ms(url)) == 20


def deadline_reply(sock: socket.socket, opened: float) -> str:
    """The server's answer to a connection it timed out, once it closed it; never before
    the deadline (the socket's own 10 s timeout catches a deadline that never fires)."""
    reply = answer(sock)
    assert time.monotonic() - opened > TIMEOUT - 0.5, "closed before the deadline"
    return reply


def past_the_cap(url: str) -> str | None:
    """One more connection's answer if the server refused it as past its cap (503 at
    once); None if it was still under (it waits for headers that never come)."""
    with connect(url) as extra:
        extra.settimeout(1.0)
        try:
            reply = answer(extra)
        except TimeoutError:
            return None
    return reply if reply.startswith("HTTP/1.1 503") else None


def test_headers_over_the_limit_are_refused_with_431_while_they_arrive(server):
    with connect(server.server_url) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        try:
            while sent < 128 * 1024**2:
                sock.sendall(b"a" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = answer(sock) if sent < 128 * 1024**2 else ""
    assert sent < 4 * 1024**2, f"the server read {sent} bytes of one header"
    assert reply.startswith("HTTP/1.1 431"), reply[:200]
    assert '"code": "headers_too_large"' in reply and "max_header_size" in reply
    assert_healthy(server.server_url)


def test_headers_within_the_limit_pass(server):
    response = httpx.get(f"{server.server_url}/health", headers={"X-Fine": "a" * 32 * 1024})
    assert response.status_code == 200


@pytest.mark.parametrize("sent", [b"", b"GET /health HTTP/1.1\r\nHost: x\r\n"], ids=["silent", "partial-headers"])
def test_a_connection_that_never_finishes_its_headers_is_closed(server, sent):
    started = time.monotonic()
    with connect(server.server_url) as sock:
        sock.sendall(sent)
        reply = deadline_reply(sock, started)
    assert reply.startswith("HTTP/1.1 408"), reply[:200]
    assert "request headers not received within" in reply


def test_slowloris_headers_a_byte_at_a_time_meet_the_same_deadline(server):
    """A line every 0.1 s for up to a minute: the server answers 408 while the drip goes
    on (its deadline counts from the first byte, not the last), never before it. The
    drip stops as soon as the answer is there to read, so no reset can discard it."""
    started = time.monotonic()
    with connect(server.server_url) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        for _ in range(600):
            if select.select([sock], [], [], 0.1)[0]:  # the server answered (or closed)
                break
            sock.sendall(b"X-Drip: 1\r\n")
        else:
            pytest.fail("the server let the drip go on for a minute")
        reply = deadline_reply(sock, started)
    assert reply.startswith("HTTP/1.1 408"), reply[:200]
    assert "request headers not received within" in reply


def test_a_body_that_never_arrives_is_timed_out(server):
    started = time.monotonic()
    with connect(server.server_url) as sock:
        sock.sendall(
            b"POST /workflows HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        reply = deadline_reply(sock, started)
    assert reply.startswith("HTTP/1.1 408"), reply[:200]
    assert_healthy(server.server_url)


def test_keep_alive_requests_are_not_cut_by_the_header_deadline(server):
    with httpx.Client(base_url=server.server_url, timeout=5) as http:
        for _ in range(3):
            assert http.get("/health").status_code == 200
            time.sleep(TIMEOUT * 0.75)  # idle between requests: the keep-alive timeout's, not the header deadline's


def test_connections_past_the_cap_are_answered_503_at_once(server):
    with ExitStack() as stack:
        held = [stack.enter_context(connect(server.server_url)) for _ in range(300)]
        # once the server has taken all 300 in, the next one is refused at once
        reply = eventually(lambda: past_the_cap(server.server_url), timeout=30, message="no 503 past the cap")
        assert "retry-after: 1" in reply.lower()
        assert len(held) == 300
    # once the server has seen them close, it serves again
    eventually(lambda: httpx.get(f"{server.server_url}/health", timeout=5).status_code == 200, timeout=30)
    assert_healthy(server.server_url)


def test_405_allows_every_method_of_the_path(server):
    response = httpx.request("OPTIONS", f"{server.server_url}/schedules")
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) >= {"GET", "POST"}
    response = httpx.put(f"{server.server_url}/schedules/s", json={})
    assert response.status_code == 405
    assert {"GET", "PATCH", "DELETE"} <= set(response.headers["allow"].split(", ")), response.headers["allow"]
    assert response.json()["code"] == "method_not_allowed"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_2000_slow_header_connections_leave_health_answered_and_are_closed(tmp_path):
    """How fast /health is meanwhile, and when they are closed: ``bench.b17_hostile``."""
    with LocalCluster(tmp_path / "home", server_args=("--header-timeout", "10")) as cluster:
        cluster.start_server()
        with ExitStack() as stack:
            opened = time.monotonic()
            slow = []
            for _ in range(2000):
                sock = stack.enter_context(connect(cluster.server_url))
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
                slow.append(sock)
            assert len(health_ms(cluster.server_url, count=200)) == 200  # each answered 200
            for sock in slow:  # a hang past a minute raises: the deadline never fired
                sock.settimeout(max(1.0, 60 - (time.monotonic() - opened)))
                answer(sock)  # returns once the server closed it
