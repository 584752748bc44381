"""The web console: server-rendered pages under ``/ui`` (Jinja2 templates, a little
JavaScript and CSS shipped in the package, no build step), a client of the JSON API
in process. ``docs/console.md`` says what each page shows and why this stack.

``routes`` are the thin routes; ``base`` the ``Visit`` each takes (who is signed in,
the namespace, rendering); ``pages`` renders the views, ``actions`` the buttons and
the login, ``forms`` their fields as typed values, ``queue`` the current namespace's
queue and quota, ``audit`` the audit log's page; ``session`` the cookies and CSRF,
``api`` the calls to the API and the bridge the page's live updates stream through,
``paging`` the executions list's filters, ``gantt`` an execution's tasks in time,
``charts`` the SVG charts, ``views`` how values read.
"""

from __future__ import annotations

from fastapi import APIRouter

from flux.server.console import routes

router = APIRouter()
router.include_router(routes.router)
router.include_router(routes.fallback)  # last: what no route above matched
