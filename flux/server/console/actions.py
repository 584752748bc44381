"""The console's buttons: each is a POST form with a CSRF token that makes one API
call and answers with a redirect (post/redirect/get), so the back button and a reload
never repeat an action. Login and logout live here too. Each function runs inside
``Visit.answer`` (the API's refusals and a bad CSRF token become pages) but those
that check their path's verb first, as a page that does not exist."""

from __future__ import annotations

from urllib.parse import quote

from fastapi.responses import RedirectResponse
from starlette.responses import Response

from flux.server.console import forms
from flux.server.console.api import Api, ApiError
from flux.server.console.base import Visit
from flux.server.console.session import local_path

#: The API's answer to a token check: who the token is (any valid token may ask).
TOKEN_CHECK = "/whoami"
DRAIN_VERBS = ("drain", "undrain")
SCHEDULE_VERBS = ("pause", "resume", "trigger")


async def act(visit: Visit, path: str, back: str) -> Response:
    """One POST to the API, then back where the form says (``next``), else ``back``."""
    form = await visit.form(forms.Button)
    async with visit.api() as client:
        await client.post(path)
    return RedirectResponse(local_path(form.next, back), status_code=303)


async def cancel(visit: Visit, execution_id: str) -> Response:
    return await act(
        visit, f"/executions/{quote(execution_id, safe='')}/cancel", f"/ui/executions/{quote(execution_id)}"
    )


async def redeliver(visit: Visit, name: str, delivery_id: str) -> Response:
    path = f"/hooks/{quote(name, safe='')}/deliveries/{quote(delivery_id, safe='')}/redeliver"
    return await act(visit, path, "/ui/hooks")


async def drain(visit: Visit, name: str, verb: str) -> Response:
    if verb not in DRAIN_VERBS:
        return visit.error(404, f"no action {verb!r}")
    return await visit.answer(act, f"/workers/{quote(name, safe='')}/{verb}", "/ui/fleet")


async def schedule(visit: Visit, name: str, verb: str) -> Response:
    path = f"/schedules/{quote(name, safe='')}"
    if verb == "delete":
        return await visit.answer(delete_schedule, path)
    if verb not in SCHEDULE_VERBS:
        return visit.error(404, f"no action {verb!r}")
    return await visit.answer(act, f"{path}/{verb}", "/ui/schedules")


async def delete_schedule(visit: Visit, path: str) -> Response:
    await visit.form(forms.Button)  # the CSRF check
    async with visit.api() as client:
        await client.delete(path)
    return RedirectResponse("/ui/schedules", status_code=303)


async def resume(visit: Visit, execution_id: str) -> Response:
    """A PAUSED execution goes on: its ``pause()`` returns the JSON typed in the form."""
    form = await visit.form(forms.WithInput)
    try:
        given = form.value()
    except ValueError as exc:
        return visit.error(422, f"resume input is not valid JSON: {exc}")
    async with visit.api() as client:
        await client.post(f"/executions/{quote(execution_id, safe='')}/resume", {"input": given})
    return RedirectResponse(f"/ui/executions/{quote(execution_id)}", status_code=303)


async def rerun(visit: Visit, execution_id: str) -> Response:
    """A new execution of the same workflow version with the same input."""
    await visit.form(forms.Button)  # the CSRF check
    async with visit.api() as client:
        old = await client.get(f"/executions/{quote(execution_id, safe='')}")
        new = await client.post(
            f"/workflows/{quote(old['workflow_name'], safe='')}/run",
            {"input": old["input"], "version": old["workflow_version"]},
        )
    return RedirectResponse(f"/ui/executions/{new['id']}", status_code=303)


async def run(visit: Visit, name: str) -> Response:
    """A new execution from the workflow page's form; a refusal shows on that page."""
    form = await visit.form(forms.Run)
    try:
        body = form.body()
    except ValueError as exc:
        return await _rerender(visit, name, form.text, f"input is not valid JSON: {exc}")
    async with visit.api() as client:
        try:
            execution = await client.post(f"/workflows/{quote(name, safe='')}/run", body)
        except ApiError as refused:
            if refused.status in (401, 404):
                raise
            return await _rerender(visit, name, form.text, refused.detail)
    return RedirectResponse(f"/ui/executions/{execution['id']}", status_code=303)


async def _rerender(visit: Visit, name: str, text: str, problem: str) -> Response:
    async with visit.api() as client:
        info = await client.get(f"/workflows/{quote(name, safe='')}")
        runs = await client.get("/executions", workflow=name, limit=20)
    return visit.render(
        "workflow.html",
        status=422,
        title=f"Workflow {name}",
        active="workflows",
        workflow=info,
        runs=runs,
        rate=None,
        input_text=text,
        problem=problem,
    )


async def create_schedule(visit: Visit) -> Response:
    """A new schedule from the page's form: a name, a workflow, cron or every, overlap,
    catch-up, a time zone, a JSON input."""
    form = await visit.form(forms.NewSchedule)
    try:
        body = form.body()
    except ValueError as problem:
        return visit.error(422, str(problem))
    async with visit.api() as client:
        await client.post("/schedules", body)
    return RedirectResponse("/ui/schedules", status_code=303)


def login_page(visit: Visit, next_page: str | None) -> Response:
    if not visit.session.login:
        return RedirectResponse("/ui/fleet", status_code=303)
    return visit.render("login.html", title="Sign in", next=local_path(next_page, "/ui/fleet"))


async def login(visit: Visit) -> Response:
    """Keep the token the API accepts; a refused one is said on the login page."""
    form = await visit.form(forms.Login)
    target = local_path(form.next, "/ui/fleet")
    token = form.token.strip()
    if token and await _accepted(visit, token):
        return visit.session.signed_in(visit.request, RedirectResponse(target, status_code=303), token)
    return visit.render(
        "login.html", status=401, title="Sign in", next=target, problem="That token was refused by the API."
    )


async def logout(visit: Visit) -> Response:
    await visit.form(forms.Button)  # the CSRF check
    target = "/ui/login" if visit.session.login else "/ui/fleet"
    return visit.session.signed_out(visit.request, RedirectResponse(target, status_code=303))


async def _accepted(visit: Visit, token: str) -> bool:
    async with Api(visit.request, {"Authorization": f"Bearer {token}"}) as client:
        try:
            await client.get(TOKEN_CHECK)
        except ApiError:
            return False
    return True
