"""The web console: server-rendered pages under ``/ui`` (Jinja2 templates, a little
JavaScript and CSS shipped in the package, no build step), a client of the JSON API
in process. ``docs/console.md`` says what each page shows and why this stack.

``pages`` renders the views, ``actions`` the buttons and the login, ``session`` the
cookies and CSRF, ``api`` the calls to the API and the bridge the page's live
updates stream through, ``paging`` the executions list's filters, ``gantt`` an
execution's tasks in time, ``views`` how values read, ``audit`` the audit log's page, ``queue`` the current namespace's queue and quota (the hooks page is in ``pages``).
"""

from __future__ import annotations

from fastapi import APIRouter

from flux.server.console import actions, audit, pages, queue
from flux.server.console.base import Console
from flux.server.console.session import Session


def router(login: bool, key: bytes) -> APIRouter:
    """``login``: the API wants a token; ``key``: a secret every replica shares (the
    bootstrap token), from which the CSRF key is derived."""
    api = APIRouter()
    console = Console(Session(key, login))
    pages.register(api, console)
    actions.register(api, console)
    audit.register(api, console)
    queue.register(api, console)
    pages.register_not_found(api, console)  # last: what no route above matched
    return api
