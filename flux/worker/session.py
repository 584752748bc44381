"""The worker's session with the server: registration, and calls that survive
restarts, overload, evictions and replica fail-over.

When the server is unreachable the worker retries with exponential backoff and
jitter, every loop (claims, heartbeats, checkpoints) on its own; but the worker keeps
one reachability state for the server (``Reachability``): the first call that gets
through wakes every loop waiting in backoff, so a restarted server is claimed from
at once, not after each loop's own backoff ran out. When its session is refused
(401: it was evicted, or the server forgot it) it registers again, reporting what it
still runs. A worker asked to stop while the
server is unreachable does not wait for it: every retry wait races the stop.

The session is the worker's edge: requests go out as ``flux.protocol`` models (or, for
the batches of events and log lines, the dicts they already are), and a reply is
decoded into its model here, once (``reply=``). They travel on the worker's own
keep-alive connections (``flux.worker.wire``; httpx behind a proxy).
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import logging
import random
import sys
import time
from typing import Any, Awaitable, Callable, TypeVar

import httpx
from pydantic import BaseModel

from flux.client import tls_verify
from flux.protocol.registration import RegistrationReply, WorkerRegistration
from flux.worker.config import WorkerConfig
from flux.worker.identity import NameTaken, WorkerIdentity
from flux.worker.wire import Answer, Httpx, Wire, open_wire

log = logging.getLogger("flux.worker")

Reply = TypeVar("Reply", bound=BaseModel)
#: A request body: a protocol message, or plain JSON (batches the worker holds as dicts).
Body = BaseModel | dict | None


def is_transient(exc: httpx.HTTPError) -> bool:
    """Worth retrying: the server is unreachable, shutting down or overloaded (5xx)."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code >= 500
    return isinstance(exc, httpx.TransportError)


def retry_after(exc: httpx.HTTPError) -> float:
    """Seconds an overloaded server (503) asked us to wait, else 0."""
    if isinstance(exc, httpx.HTTPStatusError):
        try:
            return max(0.0, min(float(exc.response.headers.get("retry-after", 0)), 60.0))
        except ValueError:
            return 0.0
    return 0.0


class SessionLost(Exception):
    """The server refused our session token: register again."""


class Abandoned(Exception):
    """The worker stopped waiting for the server (it is shutting down)."""


class Backoff:
    """Exponential backoff with full jitter (AWS architecture blog's recommendation)."""

    def __init__(self, base: float = 0.2, cap: float = 10.0):
        self.base, self.cap, self.attempt = base, cap, 0

    def reset(self) -> None:
        self.attempt = 0

    def next_delay(self, at_least: float = 0.0) -> float:
        """The next wait; a server's ``Retry-After`` is honoured, jittered up to twice
        its value so that a shed fleet does not come back all at once."""
        delay = random.uniform(0, min(self.cap, self.base * 2**self.attempt))
        if at_least:
            delay = max(delay, random.uniform(at_least, 2 * at_least))
        self.attempt += 1
        return delay

    async def sleep(self, at_least: float = 0.0) -> None:
        await asyncio.sleep(self.next_delay(at_least))


class Reachability:
    """Whether the server answers, shared by every loop of the worker: when any call gets
    through, every loop waiting in backoff tries again at once (a server's ``Retry-After``
    is still honoured: an overloaded server asked for that wait)."""

    def __init__(self) -> None:
        #: False from a failed call until the next one that gets through.
        self.reachable = True
        #: When the first failed call of the current outage failed (monotonic).
        self.since = 0.0
        self._back = asyncio.Event()

    def failed(self) -> None:
        if self.reachable:
            self.since = time.monotonic()
        self.reachable = False

    def reached(self) -> bool:
        """A call got through; True when that ends an outage (every waiting loop is woken)."""
        if self.reachable:
            return False
        self.reachable = True
        self._back.set()
        self._back = asyncio.Event()
        return True

    async def wait(self, seconds: float, abandon: asyncio.Event, patient: bool = False) -> None:
        """Wait ``seconds``, until the server answers another call (unless ``patient``), or
        until ``abandon`` is set (then ``Abandoned``)."""
        waiters = [asyncio.ensure_future(abandon.wait())]
        if not patient:
            waiters.append(asyncio.ensure_future(self._back.wait()))
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        if abandon.is_set():
            raise Abandoned()


def skip_optional_trio() -> None:
    """httpcore imports trio whenever it is installed, to serve trio programs; the
    worker runs on asyncio, and trio costs it ~7 MiB and ~0.1 s of CPU at start
    (docs/footprint.md). Marking it absent here (an ImportError for this process only;
    children are forked from a template made before) keeps both."""
    sys.modules.setdefault("trio", None)  # type: ignore[arg-type]


class ServerSession:
    def __init__(self, config: WorkerConfig, identity: WorkerIdentity | None):
        self.config = config
        self.identity = identity
        self.token: str | None = None
        #: Server replicas to use, current first (comma-separated in ``server_url``).
        self.urls = [url.strip() for url in config.server_url.split(",") if url.strip()]
        #: Whether the server answers; its first answer after an outage wakes every loop in backoff.
        self.reachability = Reachability()
        #: Set when the worker stops waiting for the server: retries end with Abandoned.
        self.abandon = asyncio.Event()
        self._register_lock = asyncio.Lock()
        self.http: Wire | Httpx | None = None

    def open(self) -> None:
        if self.config.runner != "inprocess":  # no workflow code runs in this process
            skip_optional_trio()
        # Idle connections are dropped before the server's keep-alive (75 s) would drop
        # them, so a heartbeat never goes out on a connection the server is closing.
        self.http = open_wire(self.urls[0], keepalive_expiry=30.0, verify=tls_verify(*self.urls))

    async def close(self) -> None:
        if self.http is not None:
            await self.http.aclose()

    async def post(
        self, path: str, json: Body, token: str | None = None, timeout: float | None = None, headers: dict | None = None
    ) -> Any:
        return (await self._send("POST", path, json, token, timeout, headers)).json()

    async def _send(
        self,
        method: str,
        path: str,
        json: Body = None,
        token: str | None = None,
        timeout: float | None = None,
        headers: dict | None = None,
    ) -> Answer | httpx.Response:
        assert self.http is not None
        headers = {"Authorization": f"Bearer {token or self.token}", **(headers or {})}
        content = None
        if isinstance(json, BaseModel):  # a default left out is the server's default: the same model
            content = json.model_dump_json(exclude_defaults=True).encode()
        elif json is not None:  # as httpx writes it
            content = jsonlib.dumps(json, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        if content is not None:
            headers["Content-Type"] = "application/json"
        response = await self.http.request(method, path, content, headers, timeout or 30.0)
        if response.status_code == 401 and token is None:
            raise SessionLost(response.text)
        response.raise_for_status()
        return response

    @property
    def reachable(self) -> bool:
        return self.reachability.reachable

    def _reached(self) -> None:
        """A call got through: after an outage, say so once (the worker's log shows it came
        back), and every loop waiting in backoff tries again now."""
        since = self.reachability.since
        if self.reachability.reached():
            log.info("server %s reachable again after %.1f s", self.urls[0], time.monotonic() - since)

    async def _wait(self, backoff: Backoff, exc: httpx.HTTPError) -> None:
        """Back off before a retry, until another call gets through or the worker stops
        waiting (``Abandoned``)."""
        self.reachability.failed()
        self._fail_over()
        asked = retry_after(exc)
        await self.reachability.wait(backoff.next_delay(asked), self.abandon, patient=asked > 0)

    def _fail_over(self) -> None:
        """Try the next server replica (``--server-url a,b``), if there is more than one."""
        if len(self.urls) > 1:
            self.urls.append(self.urls.pop(0))
            self.http.base_url = self.urls[0]
            log.warning("switching to server %s", self.urls[0])

    async def register_worker(
        self, payload: Callable[[], Awaitable[WorkerRegistration]], stale_token: str | None = None
    ) -> tuple[WorkerRegistration, RegistrationReply] | None:
        """Register (again) with what ``payload`` builds. Calls that lost the same session
        share one re-registration. Returns what was sent and the server's reply, or None
        when another call registered again meanwhile."""
        async with self._register_lock:
            if stale_token is not None and self.token != stale_token:
                return None
            body = await payload()
            # the token our name was bound to: it proves this is that worker, restarted
            held = {"X-Flux-Worker-Token": self.token} if self.token else None
            backoff = Backoff()
            while True:
                if self.abandon.is_set():
                    raise Abandoned()
                try:
                    response = await self._send(
                        "POST", "/workers/register", body, self.config.bootstrap_token, headers=held
                    )
                    reply = RegistrationReply.model_validate_json(response.content)
                    break
                except httpx.HTTPError as exc:
                    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == 409:
                        raise NameTaken(exc.response.json().get("detail", exc.response.text)) from None
                    if not is_transient(exc):
                        raise
                    log.warning("server unreachable (%s); retrying", exc.__class__.__name__)
                    await self._wait(backoff, exc)
            self._reached()
            again = "registered again" if self.token else "registered"  # a restarted server forgot its session
            self.token = reply.session_token
            if self.identity is not None:
                self.identity.save_token(self.token)
            log.info("worker %s %s with %s", self.config.name, again, self.urls[0])
            return body, reply

    async def call(
        self,
        path: str,
        json: Body,
        on_lost: Callable[[str | None], Awaitable[None]],
        timeout: float | None = None,
        method: str = "POST",
        reply: type[Reply] | None = None,
    ) -> Any:
        """A session call that survives server restarts, overload and evictions.

        Transport errors and 5xx answers are retried with backoff (until the worker
        stops waiting: Abandoned); on 401 ``on_lost`` registers again; other 4xx
        answers are the caller's to handle. A ``GET`` returns the body's bytes, a
        ``POST`` its JSON, decoded into ``reply`` (a ``flux.protocol`` model) when given.
        """
        backoff = Backoff()
        while True:
            if self.abandon.is_set():
                raise Abandoned()
            token = self.token
            try:
                response = await self._send(method, path, json if method == "POST" else None, timeout=timeout)
                self._reached()
                if method != "POST":
                    return response.content
                return response.json() if reply is None else reply.model_validate_json(response.content)
            except SessionLost:
                await on_lost(token)
            except httpx.HTTPError as exc:
                if not is_transient(exc):
                    raise
                log.warning("server call %s failed (%s); retrying", path, exc.__class__.__name__)
                await self._wait(backoff, exc)
