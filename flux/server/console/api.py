"""The console is a client of the JSON API, in process: every page reads what ``flux``
commands read and every button makes the call the CLI makes, through the same routes,
checks and wake-ups, so the console adds no branch to the API and cannot drift from it.

``Api`` makes one page's calls (the user's token as ``Authorization: Bearer``).
``forward`` hands a browser's GET under ``/ui/api/...`` to the API's route of the same
path with that header, streaming as it goes: that is how the page's JavaScript follows
Server-Sent Events (logs, events, state changes) with the HttpOnly cookie, which an
``EventSource`` cannot turn into a header itself.

A page acts in one namespace (``base.Visit.namespace``: the one ``Visit.look`` chose,
else the page's ``?namespace=``, else ``default``): its calls on namespaced things go
to ``/namespaces/NAME/...`` (docs/namespaces.md).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from fastapi import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from flux.domain.namespaces import DEFAULT
from flux.server.console.session import Session

#: The prefix under which the browser reads the API with its cookie.
BRIDGE = "/ui/api"
#: The API paths of namespaced things (the rest, /workers, belongs to no namespace).
NAMESPACED = ("/workflows", "/executions", "/schedules", "/secrets", "/cache", "/watch/", "/hooks")


def namespace_prefix(namespace: str) -> str:
    """``/namespaces/NAME`` for ``namespace``; '' for ``default`` (its alias)."""
    return "" if namespace == DEFAULT else f"/namespaces/{quote(namespace, safe='')}"


class ApiError(Exception):
    """The API refused a call: its status and its ``detail``."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


class Api:
    def __init__(self, request: Request, headers: dict[str, str], namespace: str = DEFAULT):
        # The browser's address, so that the audit log names who pressed the button.
        client = (request.client.host, request.client.port) if request.client else ("127.0.0.1", 0)
        transport = httpx.ASGITransport(app=request.app, raise_app_exceptions=False, client=client)
        self._client = httpx.AsyncClient(
            transport=transport, base_url="http://flux-console", headers=headers, timeout=30.0
        )
        self._prefix = namespace_prefix(namespace)

    async def __aenter__(self) -> "Api":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def call(self, method: str, path: str, params: dict | None = None, body: Any = None) -> httpx.Response:
        params = {key: value for key, value in (params or {}).items() if value not in (None, "")}
        if path.startswith(NAMESPACED):
            path = self._prefix + path
        response = await self._client.request(method, path, params=params, json=body)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, str(detail))
        return response

    async def get(self, path: str, **params: Any) -> Any:
        return (await self.call("GET", path, params)).json()

    async def post(self, path: str, body: Any = None) -> Any:
        return (await self.call("POST", path, body=body)).json()

    async def delete(self, path: str) -> None:
        await self.call("DELETE", path)


class Forward(Response):
    """A response that is the API's own answer to the same GET, minus the prefix."""

    def __init__(self, request: Request, session: Session, path: str):
        super().__init__()
        headers = [(k, v) for k, v in request.scope["headers"] if k not in (b"authorization", b"cookie")]
        headers += [(k.lower().encode(), v.encode()) for k, v in session.api_headers(request).items()]
        self._scope = {**request.scope, "path": "/" + path, "raw_path": ("/" + path).encode(), "headers": headers}
        self._app = request.app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(self._scope, receive, send)
