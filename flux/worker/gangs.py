"""A gang member's start on its worker (docs/gangs.md#on-the-worker).

Before a member's user code runs, its worker reserves a port on the address its peers
reach it at (``--advertise-address``), then posts a ``Rendezvous`` to the server and
posts again while the reply is not ``ready`` (the server holds each post up to its
``wait`` while peers are missing, so this is a long poll, not a busy loop). Once every
member arrived, the reply names them and rank 0's address and port: the member's
process gets them as ``ctx.gang`` and as the six variables torch.distributed's
``env://`` reads. The port is released just before the member's process starts, so
that rank 0's code can bind it (``init_process_group`` does; the window in which another
process could take it is the child's start, milliseconds).

Three ways out without running user code: the server answers 409 (the gang's attempt
was ended meanwhile: another member crashed or was late), and the member reports
nothing more; ``start_timeout`` and ``BACKSTOP`` pass, counted from when this worker
received the job (the server counts ``start_timeout`` from the placement and ends the
gang's attempt first): the member ends its attempt itself; or the worker stops it (a cancel, a preemption,
a drain) while it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from typing import Any, Awaitable, Callable, Iterator
from urllib.parse import urlsplit

import httpx

from flux.protocol.gangs import Rendezvous, RendezvousReply
from flux.worker.runners.base import Job, Stop
from flux.worker.session import Abandoned

log = logging.getLogger("flux.worker")

#: Seconds the server may hold one rendezvous post while peers are missing (its cap is 30).
HOLD = 10.0
#: Seconds between posts when a server answers "not ready" at once instead of holding.
MIN_PERIOD = 0.1
#: Seconds past ``start_timeout`` a member waits before ending its attempt itself: the
#: server's own deadline (from the placement, a little earlier) decides first, and this
#: only ends a member whose server is out of reach.
BACKSTOP = 10.0
#: The cause of an attempt a member ends because its gang did not start in time.
LATE = "gang did not start within start_timeout"
#: The statuses that mean the gang's attempt, or this member's, is no longer running
#: (409: ended by the server; 403, 404: fenced, as a refused checkpoint is).
ENDED = (403, 404, 409)


class GangEnded(Exception):
    """The server ended the gang's attempt before every member arrived: do not start."""


class GangLate(Exception):
    """``start_timeout`` passed before every member arrived."""


def advertise_address(server_url: str) -> str:
    """The address this host has toward the server (the first of ``--server-url``'s
    replicas): the local end of a UDP socket connected to it. Connecting a UDP socket
    sends nothing; it only asks the kernel for the route. For a server on 127.0.0.1 it
    is 127.0.0.1; where the server's host cannot be resolved, this host's name's address."""
    first = server_url.split(",")[0].strip()
    parts = urlsplit(first if "://" in first else f"http://{first}")
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        family, kind, proto, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.connect(where)
            return probe.getsockname()[0]
    except OSError as exc:
        log.warning("cannot find this host's address toward %s (%s); advertising its name's", host, exc)
        try:
            return socket.gethostbyname(socket.gethostname())
        except OSError:
            return "127.0.0.1"


@contextlib.contextmanager
def reserved_port(address: str) -> Iterator[int]:
    """A free TCP port, held (bound, not listening) until the block ends: the port a
    member's peers are told, so that no other process on this host is given it while the
    gang gathers. Bound on ``address`` when that is one of this host's; otherwise (an
    address behind NAT, a name) on every interface."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    held = socket.socket(family, socket.SOCK_STREAM)
    try:
        try:
            held.bind((address, 0))
        except OSError:
            held.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
        yield held.getsockname()[1]
    finally:
        held.close()  # not listening: the port is free again at once (no TIME_WAIT)


async def rendezvous(
    call: Callable[..., Awaitable[Any]], job: Job, address: str, port: int, deadline: float, stop: Stop
) -> RendezvousReply | None:
    """Post this member's arrival until every member arrived (the reply), the server
    ended the gang's attempt (``GangEnded``), ``deadline`` (``time.monotonic``) passed
    (``GangLate``), or the worker stopped the attempt or stopped waiting for the server
    (``stop``, ``Abandoned``: None)."""
    assert job.gang is not None
    path = f"/executions/{job.id}/rendezvous"
    stopped = asyncio.ensure_future(_first(stop.kill, stop.cancel))
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GangLate()
            body = Rendezvous(attempt=job.attempt, address=address, port=port, wait=min(HOLD, left))
            began = time.monotonic()
            post = asyncio.ensure_future(call(path, body, timeout=body.wait + 10, reply=RendezvousReply))
            done, _ = await asyncio.wait({post, stopped}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            if post not in done:
                post.cancel()
                if stopped in done:
                    return None
                raise GangLate()
            try:
                reply = post.result()
            except Abandoned:
                return None
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code in ENDED:
                    raise GangEnded(exc.response.text) from None
                raise
            if reply.ready:
                return reply
            await asyncio.sleep(max(0.0, MIN_PERIOD - (time.monotonic() - began)))
    finally:
        stopped.cancel()


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
