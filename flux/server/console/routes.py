"""``/ui``: the console's pages and buttons. Thin, like the API's routes: a ``Visit``
(``base.VISIT``: the request, its session and templates) and the typed query or path,
then one function of ``pages``, ``actions``, ``queue`` or ``audit`` inside
``Visit.answer`` (who is signed in asked first; the API's refusals as pages)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from flux.server.console import actions, audit, pages, queue
from flux.server.console.api import Forward
from flux.server.console.base import VISIT, Visit
from flux.server.console.paging import Filters

router = APIRouter(include_in_schema=False)
#: What no route above matched: included last.
fallback = APIRouter(include_in_schema=False)
AFTER = Query(default="", description="The cursor of the page to show (the previous page's X-Next-Cursor)")


@router.get("/")
@router.get("/ui")
@router.get("/ui/")
async def home() -> Response:
    return RedirectResponse("/ui/fleet", status_code=307)


@router.get("/ui/static/{name}")
async def static(name: str) -> Response:
    return pages.static(name)


@router.get("/ui/api/{path:path}")
async def bridge(path: str, visit: Visit = VISIT) -> Response:
    """The API's GETs with the cookie's token: how the page's script follows streams."""
    return Forward(visit.request, visit.session, path)


@router.get("/ui/fleet")
async def fleet(label: list[str] = Query(default=[]), visit: Visit = VISIT) -> Response:
    return await visit.answer(pages.fleet, label)


@router.get("/ui/executions")
async def execution_list(
    filters: Filters = Depends(Filters.of_request), after: str = AFTER, visit: Visit = VISIT
) -> Response:
    return await visit.answer(pages.execution_list, filters, after)


@router.get("/ui/executions/{execution_id}")
async def execution(
    execution_id: str, log_filters: dict[str, str] = Depends(pages.log_filters), visit: Visit = VISIT
) -> Response:
    return await visit.answer(pages.execution, execution_id, log_filters)


@router.get("/ui/workflows")
async def workflow_list(visit: Visit = VISIT) -> Response:
    return await visit.answer(pages.workflow_list)


@router.get("/ui/workflows/{name}")
async def workflow(name: str, visit: Visit = VISIT) -> Response:
    return await visit.answer(pages.workflow, name)


@router.get("/ui/schedules")
async def schedule_list(visit: Visit = VISIT) -> Response:
    return await visit.answer(pages.schedule_list)


@router.get("/ui/hooks")
async def hook_list(visit: Visit = VISIT) -> Response:
    return await visit.answer(pages.hook_list)


@router.get("/ui/queue")
async def queue_page(visit: Visit = VISIT) -> Response:
    return await visit.answer(queue.page)


@router.get("/ui/audit")
async def audit_page(
    fields: dict[str, str] = Depends(audit.fields_of), after: str = AFTER, visit: Visit = VISIT
) -> Response:
    return await visit.answer(audit.page, fields, after)


@router.post("/ui/workers/{name}/{verb}")
async def drain(name: str, verb: str, visit: Visit = VISIT) -> Response:
    """``drain`` or ``undrain``; another verb is a page the console does not have."""
    return await actions.drain(visit, name, verb)


@router.post("/ui/hooks/{name}/deliveries/{delivery_id}/redeliver")
async def redeliver(name: str, delivery_id: str, visit: Visit = VISIT) -> Response:
    return await visit.answer(actions.redeliver, name, delivery_id)


@router.post("/ui/executions/{execution_id}/cancel")
async def cancel(execution_id: str, visit: Visit = VISIT) -> Response:
    return await visit.answer(actions.cancel, execution_id)


@router.post("/ui/executions/{execution_id}/resume")
async def resume(execution_id: str, visit: Visit = VISIT) -> Response:
    return await visit.answer(actions.resume, execution_id)


@router.post("/ui/executions/{execution_id}/rerun")
async def rerun(execution_id: str, visit: Visit = VISIT) -> Response:
    return await visit.answer(actions.rerun, execution_id)


@router.post("/ui/workflows/{name}/run")
async def run(name: str, visit: Visit = VISIT) -> Response:
    return await visit.answer(actions.run, name)


@router.post("/ui/schedules/{name}/{verb}")
async def schedule(name: str, verb: str, visit: Visit = VISIT) -> Response:
    """``pause``, ``resume``, ``trigger`` or ``delete``; another verb is a page the console does not have."""
    return await actions.schedule(visit, name, verb)


@router.post("/ui/schedules")
async def create_schedule(visit: Visit = VISIT) -> Response:
    return await visit.answer(actions.create_schedule)


@router.get("/ui/login")
async def login_page(next_page: str | None = Query(default=None, alias="next"), visit: Visit = VISIT) -> Response:
    """Where to go once signed in is ``?next=`` (a console page only)."""
    return actions.login_page(visit, next_page)


@router.post("/ui/login")
async def login(visit: Visit = VISIT) -> Response:
    return await visit.answer_signing(actions.login)


@router.post("/ui/logout")
async def logout(visit: Visit = VISIT) -> Response:
    return await visit.answer_signing(actions.logout)


@fallback.get("/ui/{path:path}")
async def not_found(path: str, visit: Visit = VISIT) -> Response:
    """A page the console does not have: a page that says so, not the API's JSON."""
    return visit.error(404, f"the console has no page /ui/{path}")
