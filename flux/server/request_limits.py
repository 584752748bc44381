"""Limits at the edge: a pure ASGI middleware in front of every route.

It refuses, before any route code runs and in ``ErrorBody`` shape:

- a call to a route that needs a token but carries no ``Authorization`` header (401),
  before a byte of its body is read; checking the token itself stays with the route;
- a body larger than ``max_body_size`` (413): a declared ``Content-Length`` is refused
  at once, a streamed body as soon as reading passes the limit, so the server never
  holds more than the limit;
- JSON nested deeper than ``max_json_depth``, integers outside the 64-bit range,
  non-finite numbers (``NaN``, ``1e999``) and NUL characters, in the body, path or
  query (422, naming the field). Each of these, accepted, breaks something later: a
  response that cannot be serialized, a PostgreSQL column, ``compile()``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any, Callable, Iterator, Mapping

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flux.domain.numbers import INT64_MAX
from flux.domain.payloads import nests_within
from flux.server.errors import error_response, summary
from flux.server.schemas import ErrorItem


class _Refused:
    """What the JSON parser's hooks return for a number the server will not store."""

    def __init__(self, why: str):
        self.why = why


def _item(path: tuple | None, msg: str) -> ErrorItem:
    """Unroll a ``(parent, key)`` linked path into a ``loc``."""
    keys: list[str | int] = []
    while path is not None:
        path, key = path
        keys.append(key)
    return ErrorItem(loc=["body", *reversed(keys)], msg=msg)


def _walk(value: Any, max_depth: int) -> Iterator[ErrorItem]:
    """Every refused value under ``value``, depth-first (paths are built only for errors)."""
    stack: list[tuple[Any, tuple | None, int]] = [(value, None, 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, (dict, list)) and depth >= max_depth:
            yield _item(path, f"nested deeper than {max_depth} levels")
        elif isinstance(node, dict):
            for key, child in node.items():
                if "\x00" in key:
                    yield _item((path, key.replace("\x00", "\\u0000")), "key contains a NUL character")
                stack.append((child, (path, key), depth + 1))
        elif isinstance(node, list):
            stack.extend((child, (path, index), depth + 1) for index, child in enumerate(node))
        elif isinstance(node, _Refused):
            yield _item(path, node.why)
        elif isinstance(node, str) and "\x00" in node:
            yield _item(path, "string contains a NUL character")


#: What every refusal of ``json_problem`` needs somewhere in the text (and more, in
#: strings too): a run of 19 digits (an integer past 64 bits), a 3-digit exponent (a
#: float that overflows), a non-finite constant, an escaped NUL.
_MAYBE_REFUSED = re.compile(r"\d{19}|[eE][+-]?\d{3}|NaN|Infinity|\\u0000")


def json_problem(body: bytes, max_depth: int) -> ErrorItem | None:
    """The first thing in a JSON body the server refuses, or None (also for a body that
    is not JSON at all: FastAPI reports that)."""
    refused: list[_Refused] = []

    def refuse(why: str) -> _Refused:
        refused.append(_Refused(why))
        return refused[-1]

    def parse_int(text: str) -> int | _Refused:
        # Length first: a huge digit string is never converted (that is quadratic).
        if len(text.lstrip("-")) > 19 or abs(value := int(text)) > INT64_MAX:
            return refuse("integer out of the 64-bit range (|n| < 2**63)")
        return value

    def parse_float(text: str) -> float | _Refused:
        value = float(text)
        return value if math.isfinite(value) else refuse("number is not finite")

    try:
        text = body.decode(json.detect_encoding(body))
    except UnicodeDecodeError:
        return ErrorItem(loc=["body"], msg="JSON must be UTF-8 (or UTF-16/32) text")
    only_depth = not _MAYBE_REFUSED.search(text)
    if only_depth and nests_within(text, max_depth):
        return None  # nothing below could refuse it: no parse (the common case, on every worker call)
    hooks = (
        {}
        if only_depth
        else dict(  # only depth can refuse it: the parser's C speed, no hooks
            parse_int=parse_int,
            parse_float=parse_float,
            parse_constant=lambda name: refuse(f"{name} is not a JSON number"),
        )
    )
    try:
        value = json.loads(text, **hooks)
    except RecursionError:
        return ErrorItem(loc=["body"], msg=f"nested deeper than {max_depth} levels")
    except ValueError:
        return None  # not JSON: FastAPI says where it breaks
    # Cheap proof that walking would find nothing: the common case for large bodies.
    if not refused and "\\u0000" not in text and nests_within(text, max_depth):
        return None
    return next(_walk(value, max_depth), None)


def _is_json(headers: Headers) -> bool:
    """The bodies FastAPI parses as JSON: application/json or application/*+json."""
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    return content_type.startswith("application/") and (
        content_type == "application/json" or content_type.endswith("+json")
    )


def credential_gate(
    routes: Callable[[], list[BaseRoute]], gates: Mapping[Callable, str]
) -> Callable[[Scope], str | None]:
    """``scope -> reason`` for a route that has one of ``gates`` among its direct
    dependencies (each gate maps to the 401 reason), else ``None``. Read from the
    routes on first use, so it sees every route the app defined, those of included
    routers too (FastAPI keeps them behind one entry of ``app.routes``)."""
    table: list[tuple[re.Pattern, set[str], str]] | None = None

    def gate(scope: Scope) -> str | None:
        nonlocal table
        if table is None:
            table = []
            for route in flattened(routes()):
                calls = [d.call for d in getattr(getattr(route, "dependant", None), "dependencies", [])]
                reason = next((gates[call] for call in calls if call in gates), None)
                if reason is not None:
                    table.append((route.path_regex, set(route.methods or ()), reason))
        path, method = scope.get("path", ""), scope.get("method", "")
        return next((reason for regex, methods, reason in table if method in methods and regex.match(path)), None)

    return gate


def flattened(routes: list[Any]) -> list[Any]:
    """Each route with a ``dependant`` and ``path_regex``: the app's own and those of its
    included routers."""
    flat = []
    for route in routes:
        candidates = getattr(route, "effective_candidates", None)
        flat.extend(candidates() if callable(candidates) else [route])
    return [route for route in flat if hasattr(route, "path_regex") and hasattr(route, "dependant")]


#: Bodies larger than this are checked on a thread: a 10 MB one of 100,001 checkpoint
#: events took 3 s to parse and walk, and /health waited as long.
CHECK_IN_THREAD = 1024**2


class _TooLarge(Exception):
    pass


class EdgeLimits:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_size: int,
        max_json_depth: int,
        credentials_needed: Callable[[Scope], str | None],
    ):
        self.app = app
        self.max_body_size = max_body_size  # 0: no limit
        self.max_json_depth = max_json_depth
        self.credentials_needed = credentials_needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refuse_head(scope, headers)
        if refusal is None:
            try:
                body = await self._read_body(receive)
            except _TooLarge:
                refusal = self._too_large()
            else:
                if body is None:
                    return  # the client left
                refusal = await self._refuse_body(body, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _refuse_head(self, scope: Scope, headers: Headers) -> Response | None:
        if "\x00" in scope["path"]:
            return _invalid(ErrorItem(loc=["path"], msg="contains a NUL character"))
        if b"%00" in scope["query_string"]:
            return _invalid(ErrorItem(loc=["query"], msg="contains a NUL character"))
        if "authorization" not in headers:
            reason = self.credentials_needed(scope)
            if reason is not None:
                return error_response(401, reason, headers={"WWW-Authenticate": "Bearer"})
        declared = headers.get("content-length", "")
        if self.max_body_size and declared.isdigit() and int(declared) > self.max_body_size:
            return self._too_large()
        return None

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or None if the client left; _TooLarge once it passes the limit."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if self.max_body_size and size > self.max_body_size:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _refuse_body(self, body: bytes, headers: Headers) -> Response | None:
        if not body or not _is_json(headers):
            return None
        if len(body) > CHECK_IN_THREAD:  # seconds of parsing and walking: off the event loop
            problem = await asyncio.to_thread(json_problem, body, self.max_json_depth)
        else:
            problem = json_problem(body, self.max_json_depth)
        return _invalid(problem) if problem is not None else None

    def _too_large(self) -> Response:
        return error_response(413, f"request body larger than {self.max_body_size} bytes (the server's max_body_size)")


def _invalid(problem: ErrorItem) -> Response:
    return error_response(422, summary([problem]), errors=[problem])


def _replay(body: bytes, receive: Receive) -> Receive:
    """Hand the app the body already read, then the live channel (disconnects)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
