"""One delivery attempt: where a hook may go, and the signed POST.

A hook must not become a way into the server's own network (SSRF): its host's
addresses are checked when it is created and again at every attempt (a name can
resolve elsewhere later), and the POST goes to the address that was checked, with the
name kept for ``Host`` and TLS (SNI and certificate), so a second lookup cannot swap
it (DNS rebinding). ``--hooks-allow-private`` lifts the check (a receiver on the
same network, the tests' on loopback). Redirects are not followed (a 3xx is a
failure), and at most ``READ_LIMIT`` bytes of an answer are read.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from flux.domain.hooks import SIGNATURE_HEADER, forbidden_address, signature
from flux.server.errors import Invalid

#: Bytes of a receiver's answer read at most (its status is what counts).
READ_LIMIT = 4096
USER_AGENT = "flux-hooks/1"
#: Seconds a creation waits for its URL's name to resolve.
RESOLVE_WAIT = 5.0


class Refused(Exception):
    """The hook's URL leads somewhere a hook may not go."""


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    latency: float
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


async def addresses(url: str, allow_private: bool) -> list[str]:
    """The checked addresses of ``url``'s host (``Refused`` naming why); with
    ``allow_private``, whatever it resolves to."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused(f"{url!r} is not an http(s) URL with a host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Refused(f"cannot resolve {parts.hostname}: {exc}") from None
    found = list(dict.fromkeys(info[4][0] for info in infos))
    if not allow_private:
        for address in found:
            why = forbidden_address(address)
            if why:
                raise Refused(
                    f"{parts.hostname} resolves to {why}; hooks may not reach the server's own network "
                    "(the server's --hooks-allow-private allows it)"
                )
    return found


async def check_url(url: str, allow_private: bool) -> None:
    """At creation: 422 for a URL to a forbidden address. A name that does not resolve
    yet (or not within ``RESOLVE_WAIT``) is accepted: its attempts fail, and are
    retried, until it does."""
    try:
        async with asyncio.timeout(RESOLVE_WAIT):
            await addresses(url, allow_private)
    except TimeoutError:
        return
    except Refused as exc:
        if str(exc).startswith("cannot resolve"):
            return
        raise Invalid(f"url: {exc}") from None


def _pinned(url: str, address: str) -> str:
    """``url`` with its host replaced by ``address``."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


async def post(
    client: httpx.AsyncClient, url: str, secret: str, body: dict, allow_private: bool, timeout: float
) -> Outcome:
    """One signed POST of ``body``, the whole of it within ``timeout`` seconds."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            address = (await addresses(url, allow_private))[0]
            content = json.dumps(body, separators=(",", ":")).encode()
            host = urlsplit(url).netloc.rpartition("@")[2]
            headers = {
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
                "Host": host,
                SIGNATURE_HEADER: signature(secret, int(time.time()), content),
                "Flux-Delivery": body["id"],
                "Flux-Event": body["type"],
            }
            extensions = {"sni_hostname": urlsplit(url).hostname} if url.lower().startswith("https") else {}
            request = client.build_request(
                "POST", _pinned(url, address), content=content, headers=headers, extensions=extensions
            )
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                read = 0
                async for chunk in response.aiter_raw():
                    read += len(chunk)
                    if read >= READ_LIMIT:
                        break
            finally:
                await response.aclose()
    except Refused as exc:
        return Outcome(None, time.monotonic() - started, str(exc))
    except TimeoutError:
        return Outcome(None, time.monotonic() - started, f"no answer within {timeout:g}s")
    except httpx.HTTPError as exc:
        return Outcome(None, time.monotonic() - started, f"{type(exc).__name__}: {exc}"[:500])
    latency = time.monotonic() - started
    error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
    return Outcome(response.status_code, latency, error)
