"""What every console route shares: the session, the templates, and how a page answers
(rendered with its CSRF token and who is signed in; a refusal of the API as an error
page; no token yet: the login page). Who is signed in (``GET /whoami``) decides which
pages the menu offers and which buttons a page shows (``may``, in the current
namespace); the API still refuses what the role may not do (403).

The current namespace (``choose``) is the one the request names (``?namespace=``, or a
button's form: it acts where its page showed), else the browser's last choice (a
cookie) while the token still sees it, else ``default``, else the first the token sees
(``GET /namespaces`` lists only those), so a token scoped elsewhere opens in its own."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.responses import Response

from flux.domain.access import Action, Principal, Role
from flux.domain.namespaces import DEFAULT
from flux.server.console.api import BRIDGE, Api, ApiError, current, namespace_prefix
from flux.server.console.session import CSRF_FIELD, CsrfRefused, Session
from flux.server.console.views import environment

#: The menu: each page, and what its reads need (the fleet and the audit log are not for every role).
NAV = [
    ("fleet", "Fleet", Action.READ_FLEET),
    ("executions", "Executions", Action.READ),
    ("queue", "Queue", Action.READ),
    ("workflows", "Workflows", Action.READ),
    ("schedules", "Schedules", Action.READ),
    ("hooks", "Hooks", Action.MANAGE_HOOKS),
    ("audit", "Audit", Action.READ_AUDIT),
]


def viewer(request: Request) -> Principal | None:
    """Who is signed in, as ``answer`` learned it; None on a page that did not ask (login)."""
    return getattr(request.state, "viewer", None)


def may(request: Request, action: Action | str) -> bool:
    principal = viewer(request)
    return principal is not None and principal.may(Action(action), current(request))


class Console:
    def __init__(self, session: Session):
        self.session = session
        self.templates = environment()

    def nav(self, request: Request) -> list[tuple[str, str]]:
        return [(key, label) for key, label, action in NAV if may(request, action)]

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.templates.get_template(template).render(
            request=request,
            csrf=self.session.csrf(request),
            csrf_field=CSRF_FIELD,
            nav=self.nav(request),
            bridge=BRIDGE + namespace_prefix(request),
            namespace=current(request),
            namespaces=getattr(request.state, "namespaces", []),
            signed_in=bool(self.session.token(request)),
            login=self.session.login,
            who=viewer(request),
            may=lambda action: may(request, action),
            **context,
        )
        response = HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})
        return self.session.keep(request, response)

    def error(self, request: Request, status: int, detail: str) -> Response:
        if status == 401 and self.session.login:
            return RedirectResponse(f"/ui/login?next={quote(_here(request))}", status_code=303)
        return self.render(
            request, "error.html", status=status, title=f"Error {status}", status_code=status, detail=detail
        )

    @contextlib.asynccontextmanager
    async def api(self, request: Request) -> AsyncIterator[Api]:
        async with Api(request, self.session.api_headers(request)) as api:
            yield api

    async def look(self, request: Request) -> None:
        """Who is signed in, the namespaces it sees, and the one this request acts in."""
        async with self.api(request) as api:
            who, listed = await asyncio.gather(api.get("/whoami"), api.get("/namespaces"))
        scope = frozenset(who["namespaces"]) if who["namespaces"] is not None else None
        request.state.viewer = Principal(who["name"], Role(who["role"]), scope)
        request.state.namespaces = [info["name"] for info in listed]
        request.state.namespace = await self.choose(request, request.state.namespaces)

    async def choose(self, request: Request, visible: list[str]) -> str:
        """The namespace this request acts in; one the token sees is kept for the next pages."""
        named = request.query_params.get("namespace")
        if not named and request.method == "POST":
            named = (await self.session.posted(request)).get("namespace")
        kept = self.session.namespace(request)
        if named:
            chosen = named  # one out of sight is the API's 404, like any other name
        elif kept in visible:
            chosen = kept
        else:
            chosen = DEFAULT if DEFAULT in visible or not visible else visible[0]
        if chosen != kept and chosen in visible:
            self.session.choose(request, chosen)
        return chosen


def _here(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


async def answer(console: Console, request: Request, page, who: bool = True) -> Response:  # noqa: ANN001 - an async callable
    """Run a page or an action as whoever is signed in (``who``: ask first; not to sign
    in or out), turning the API's refusals and a bad CSRF token into pages."""
    try:
        if who:
            await console.look(request)
        return console.session.keep(request, await page())
    except ApiError as refused:
        return console.error(request, refused.status, refused.detail)
    except CsrfRefused as refused:
        return console.error(request, 403, str(refused))
