"""What every console route shares: a ``Visit`` (its dependency ``VISIT``: the
request, the session, the templates) and how a page answers (rendered with its CSRF
token and who is signed in; a refusal of the API as an error page; no token yet: the
login page). Who is signed in (``GET /whoami``) decides which
pages the menu offers and which buttons a page shows (``may``, in the current
namespace); the API still refuses what the role may not do (403).

The current namespace (``choose``) is the one the request names (``?namespace=``, or a
button's form: it acts where its page showed), else the browser's last choice (a
cookie) while the token still sees it, else ``default``, else the first the token sees
(``GET /namespaces`` lists only those), so a token scoped elsewhere opens in its own."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Concatenate, ParamSpec
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment
from starlette.responses import Response

from flux.domain.access import Action, Principal, Role
from flux.domain.namespaces import DEFAULT
from flux.server.console.api import BRIDGE, Api, ApiError, namespace_prefix
from flux.server.console.forms import Form, form_of
from flux.server.console.session import CSRF_FIELD, CsrfRefused, Fresh, Session
from flux.server.console.views import environment
from flux.server.services import Services, services

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
P = ParamSpec("P")


@dataclass(frozen=True)
class Console:
    """What every request of one server shares: the session's keys and the templates."""

    session: Session
    templates: Environment = field(default_factory=environment)


@functools.lru_cache(maxsize=8)
def _console(key: bytes, login: bool) -> Console:
    """One per server's settings: the templates are parsed once, not per request."""
    return Console(Session(key, login))


@dataclass
class Visit:
    """One request to the console: who asks and the namespaces it sees (once ``look``
    asked the API), the namespace it acts in, and the cookies its answer sets."""

    request: Request
    console: Console
    namespace: str = DEFAULT
    viewer: Principal | None = None
    namespaces: list[str] = field(default_factory=list)
    fresh: Fresh = field(default_factory=Fresh)

    @property
    def session(self) -> Session:
        return self.console.session

    def may(self, action: Action | str) -> bool:
        return self.viewer is not None and self.viewer.may(Action(action), self.namespace)

    def nav(self) -> list[tuple[str, str]]:
        return [(key, label) for key, label, action in NAV if self.may(action)]

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.console.templates.get_template(template).render(
            request=self.request,
            csrf=self.session.csrf(self.request, self.fresh),
            csrf_field=CSRF_FIELD,
            nav=self.nav(),
            bridge=BRIDGE + namespace_prefix(self.namespace),
            namespace=self.namespace,
            namespaces=self.namespaces,
            signed_in=bool(self.session.token(self.request)),
            login=self.session.login,
            who=self.viewer,
            may=self.may,
            **context,
        )
        return self.keep(HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"}))

    def keep(self, response: Response) -> Response:
        return self.session.keep(self.request, response, self.fresh)

    def error(self, status: int, detail: str) -> Response:
        if status == 401 and self.session.login:
            return RedirectResponse(f"/ui/login?next={quote(_here(self.request))}", status_code=303)
        return self.render("error.html", status=status, title=f"Error {status}", status_code=status, detail=detail)

    @contextlib.asynccontextmanager
    async def api(self) -> AsyncIterator[Api]:
        async with Api(self.request, self.session.api_headers(self.request), self.namespace) as api:
            yield api

    async def form(self, kind: type[Form]) -> Form:
        """The POSTed form as ``kind`` (``console.forms``), once its CSRF token and origin are checked."""
        return form_of(kind, await self.session.form(self.request))

    async def look(self) -> None:
        """Who is signed in, the namespaces it sees, and the one this request acts in."""
        async with self.api() as api:
            who, listed = await asyncio.gather(api.get("/whoami"), api.get("/namespaces"))
        scope = frozenset(who["namespaces"]) if who["namespaces"] is not None else None
        self.viewer = Principal(who["name"], Role(who["role"]), scope)
        self.namespaces = [info["name"] for info in listed]
        self.namespace = await self.choose(self.namespaces)

    async def choose(self, visible: list[str]) -> str:
        """The namespace this request acts in; one the token sees is kept for the next pages."""
        named = self.request.query_params.get("namespace")
        if not named and self.request.method == "POST":
            named = (await self.session.posted(self.request)).get("namespace")
        kept = self.session.namespace(self.request)
        if named:
            chosen = named  # one out of sight is the API's 404, like any other name
        elif kept in visible:
            chosen = kept
        else:
            chosen = DEFAULT if DEFAULT in visible or not visible else visible[0]
        if chosen != kept and chosen in visible:
            self.fresh.namespace = chosen
        return chosen

    async def answer(
        self, page: Callable[Concatenate[Visit, P], Awaitable[Response]], *args: P.args, **kwargs: P.kwargs
    ) -> Response:
        """Run a page or an action as whoever is signed in (asked first)."""
        return await self._answer(True, page, *args, **kwargs)

    async def answer_signing(
        self, page: Callable[Concatenate[Visit, P], Awaitable[Response]], *args: P.args, **kwargs: P.kwargs
    ) -> Response:
        """Run a sign-in or a sign-out: nobody is asked about first."""
        return await self._answer(False, page, *args, **kwargs)

    async def _answer(self, who: bool, page: Callable[..., Awaitable[Response]], *args: Any, **kwargs: Any) -> Response:
        """The API's refusals and a bad CSRF token become pages."""
        try:
            if who:
                await self.look()
            return self.keep(await page(self, *args, **kwargs))
        except ApiError as refused:
            return self.error(refused.status, refused.detail)
        except CsrfRefused as refused:
            return self.error(403, str(refused))


async def visit(request: Request, svc: Services = Depends(services)) -> Visit:
    """The dependency of every console route: this request, before anyone is asked about."""
    console = _console(svc.bootstrap_token, svc.api_token is not None)
    return Visit(request, console, namespace=request.query_params.get("namespace") or DEFAULT)


VISIT = Depends(visit)


def _here(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")
