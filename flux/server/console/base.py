"""What every console route shares: the session, the templates, and how a page answers
(rendered with its CSRF token; a refusal of the API as an error page; no token yet:
the login page)."""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.responses import Response
from urllib.parse import quote

from flux.server.console.api import BRIDGE, Api, ApiError, namespace_prefix
from flux.server.console.session import CSRF_FIELD, CsrfRefused, Session
from flux.server.console.views import environment

NAV = [("fleet", "Fleet"), ("executions", "Executions"), ("workflows", "Workflows"), ("schedules", "Schedules")]


class Console:
    def __init__(self, session: Session):
        self.session = session
        self.templates = environment()

    def nav(self) -> list[tuple[str, str]]:
        return NAV

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.templates.get_template(template).render(
            request=request, csrf=self.session.csrf(request), csrf_field=CSRF_FIELD, nav=self.nav(),
            bridge=BRIDGE + namespace_prefix(request),
            signed_in=bool(self.session.token(request)), login=self.session.login, **context,
        )
        response = HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})
        return self.session.keep(request, response)

    def error(self, request: Request, status: int, detail: str) -> Response:
        if status == 401 and self.session.login:
            return RedirectResponse(f"/ui/login?next={quote(_here(request))}", status_code=303)
        return self.render(request, "error.html", status=status, title=f"Error {status}", status_code=status, detail=detail)

    @contextlib.asynccontextmanager
    async def api(self, request: Request) -> AsyncIterator[Api]:
        async with Api(request, self.session.api_headers(request)) as api:
            yield api


def _here(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


async def answer(console: Console, request: Request, page) -> Response:  # noqa: ANN001 - an async callable
    """Run a page or an action, turning the API's refusals and a bad CSRF token into pages."""
    try:
        return await page()
    except ApiError as refused:
        return console.error(request, refused.status, refused.detail)
    except CsrfRefused as refused:
        return console.error(request, 403, str(refused))
