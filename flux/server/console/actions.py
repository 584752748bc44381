"""The console's buttons: each is a POST form with a CSRF token that makes one API
call and answers with a redirect (post/redirect/get), so the back button and a reload
never repeat an action. Login and logout live here too."""

from __future__ import annotations

import json
from typing import Any, Callable
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from flux.server.console.api import Api, ApiError
from flux.server.console.base import Console, answer
from flux.server.console.session import local_path

#: The API's answer to a token check: who the token is (any valid token may ask).
TOKEN_CHECK = "/whoami"


def register(api: APIRouter, console: Console) -> None:
    session = console.session

    async def act(
        request: Request, path: str, back: str, body: Any = None, then: Callable[[Any], str] | None = None
    ) -> Response:
        async def action() -> Response:
            form = await session.form(request)
            async with console.api(request) as client:
                result = await client.post(path, body)
            target = then(result) if then else local_path(form.get("next"), back)
            return RedirectResponse(target, status_code=303)

        return await answer(console, request, action)

    @api.post("/ui/workers/{name}/{verb}", include_in_schema=False)
    async def drain(name: str, verb: str, request: Request) -> Response:
        if verb not in ("drain", "undrain"):
            return console.error(request, 404, f"no action {verb!r}")
        return await act(request, f"/workers/{quote(name, safe='')}/{verb}", "/ui/fleet")

    @api.post("/ui/hooks/{name}/deliveries/{delivery_id}/redeliver", include_in_schema=False)
    async def redeliver(name: str, delivery_id: str, request: Request) -> Response:
        return await act(
            request, f"/hooks/{quote(name, safe='')}/deliveries/{quote(delivery_id, safe='')}/redeliver", "/ui/hooks"
        )

    @api.post("/ui/executions/{execution_id}/cancel", include_in_schema=False)
    async def cancel(execution_id: str, request: Request) -> Response:
        return await act(
            request, f"/executions/{quote(execution_id, safe='')}/cancel", f"/ui/executions/{quote(execution_id)}"
        )

    @api.post("/ui/executions/{execution_id}/resume", include_in_schema=False)
    async def resume(execution_id: str, request: Request) -> Response:
        """A PAUSED execution goes on: its ``pause()`` returns the JSON typed in the form."""

        async def action() -> Response:
            form = await session.form(request)
            text = form.get("input", "").strip()
            back = f"/ui/executions/{quote(execution_id)}"
            try:
                given = json.loads(text) if text else None
            except ValueError as exc:
                return console.error(request, 422, f"resume input is not valid JSON: {exc}")
            async with console.api(request) as client:
                await client.post(f"/executions/{quote(execution_id, safe='')}/resume", {"input": given})
            return RedirectResponse(back, status_code=303)

        return await answer(console, request, action)

    @api.post("/ui/executions/{execution_id}/rerun", include_in_schema=False)
    async def rerun(execution_id: str, request: Request) -> Response:
        """A new execution of the same workflow version with the same input."""

        async def action() -> Response:
            await session.form(request)
            async with console.api(request) as client:
                old = await client.get(f"/executions/{quote(execution_id, safe='')}")
                new = await client.post(
                    f"/workflows/{quote(old['workflow_name'], safe='')}/run",
                    {"input": old["input"], "version": old["workflow_version"]},
                )
            return RedirectResponse(f"/ui/executions/{new['id']}", status_code=303)

        return await answer(console, request, action)

    @api.post("/ui/workflows/{name}/run", include_in_schema=False)
    async def run(name: str, request: Request) -> Response:
        async def action() -> Response:
            form = await session.form(request)
            text = form.get("input", "").strip()
            body: dict[str, Any] = {}
            try:
                body["input"] = json.loads(text) if text else None
                if form.get("version", "").strip():
                    body["version"] = int(form["version"])
            except ValueError as exc:
                return await rerender(request, name, text, f"input is not valid JSON: {exc}")
            async with console.api(request) as client:
                try:
                    execution = await client.post(f"/workflows/{quote(name, safe='')}/run", body)
                except ApiError as refused:
                    if refused.status in (401, 404):
                        raise
                    return await rerender(request, name, text, refused.detail)
            return RedirectResponse(f"/ui/executions/{execution['id']}", status_code=303)

        return await answer(console, request, action)

    async def rerender(request: Request, name: str, text: str, problem: str) -> Response:
        async with console.api(request) as client:
            info = await client.get(f"/workflows/{quote(name, safe='')}")
            runs = await client.get("/executions", workflow=name, limit=20)
        return console.render(
            request,
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

    @api.post("/ui/schedules/{name}/{verb}", include_in_schema=False)
    async def schedule(name: str, verb: str, request: Request) -> Response:
        path = f"/schedules/{quote(name, safe='')}"
        if verb == "delete":

            async def deleted() -> Response:
                await session.form(request)  # the CSRF check
                async with console.api(request) as client:
                    await client.delete(path)
                return RedirectResponse("/ui/schedules", status_code=303)

            return await answer(console, request, deleted)
        if verb not in ("pause", "resume", "trigger"):
            return console.error(request, 404, f"no action {verb!r}")
        return await act(request, f"{path}/{verb}", "/ui/schedules")

    @api.post("/ui/schedules", include_in_schema=False)
    async def create_schedule(request: Request) -> Response:
        """A new schedule from the page's form: a name, a workflow, cron or every, overlap,
        catch-up, a time zone, a JSON input."""

        async def created() -> Response:
            form = await session.form(request)
            body: dict[str, Any] = {"name": form.get("name", "").strip(), "workflow": form.get("workflow", "").strip()}
            when, timing = form.get("kind", "cron"), form.get("timing", "").strip()
            if when not in ("cron", "every"):
                return console.error(request, 422, f"a schedule runs on cron or every, not {when!r}")
            body[when] = timing
            for field in ("overlap", "catch_up", "timezone"):  # the API's defaults where left empty
                if form.get(field, "").strip():
                    body[field] = form[field].strip()
            text = form.get("input", "").strip()
            try:
                body["input"] = json.loads(text) if text else None
            except ValueError as exc:
                return console.error(request, 422, f"the schedule's input is not valid JSON: {exc}")
            async with console.api(request) as client:
                await client.post("/schedules", body)
            return RedirectResponse("/ui/schedules", status_code=303)

        return await answer(console, request, created)

    @api.get("/ui/login", include_in_schema=False)
    async def login_page(request: Request) -> Response:
        if not session.login:
            return RedirectResponse("/ui/fleet", status_code=303)
        return console.render(
            request, "login.html", title="Sign in", next=local_path(request.query_params.get("next"), "/ui/fleet")
        )

    @api.post("/ui/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        async def action() -> Response:
            form = await session.form(request)
            target = local_path(form.get("next"), "/ui/fleet")
            token = form.get("token", "").strip()
            if token and await _accepted(request, token):
                return session.signed_in(request, RedirectResponse(target, status_code=303), token)
            return console.render(
                request,
                "login.html",
                status=401,
                title="Sign in",
                next=target,
                problem="That token was refused by the API.",
            )

        return await answer(console, request, action, who=False)

    @api.post("/ui/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        async def action() -> Response:
            await session.form(request)
            return session.signed_out(
                request, RedirectResponse("/ui/login" if session.login else "/ui/fleet", status_code=303)
            )

        return await answer(console, request, action, who=False)


async def _accepted(request: Request, token: str) -> bool:
    async with Api(request, {"Authorization": f"Bearer {token}"}) as client:
        try:
            await client.get(TOKEN_CHECK)
        except ApiError:
            return False
    return True
