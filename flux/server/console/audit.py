"""The audit log's page (``/ui/audit``): ``GET /audit``'s filters as a URL, newest
first, a keyset page at a time (docs/security.md#audit). Read only, like the API."""

from __future__ import annotations

import time
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response

from flux.domain.access import Action
from flux.server.console.base import Console, answer
from flux.server.console.paging import SINCE

PAGE = 50
FIELDS = ("namespace", "token", "action", "since")
ACTIONS = tuple(action.value for action in Action)


def filters_of(query) -> dict[str, str]:  # noqa: ANN001 - request.query_params
    fields = {key: query.get(key, "")[:128] for key in FIELDS}
    if fields["action"] not in ACTIONS:
        fields["action"] = ""
    if fields["since"] not in SINCE:
        fields["since"] = ""
    return fields


def url(fields: dict[str, str], **changes: str) -> str:
    given = {key: value for key, value in {**fields, **changes}.items() if value}
    return "/ui/audit" + (f"?{urlencode(given)}" if given else "")


def register(api: APIRouter, console: Console) -> None:
    @api.get("/ui/audit", include_in_schema=False)
    async def audit_page(request: Request) -> Response:
        async def page() -> Response:
            fields = filters_of(request.query_params)
            after = request.query_params.get("after", "")
            after = after if after.isdigit() else ""
            params = {
                "namespace": fields["namespace"],
                "token": fields["token"],
                "action": fields["action"],
                "limit": PAGE,
                "after": after,
            }
            if fields["since"]:
                params["since"] = time.time() - SINCE[fields["since"]]
            async with console.api(request) as client:
                response = await client.call("GET", "/audit", params)
            return console.render(
                request,
                "audit.html",
                title="Audit",
                active="audit",
                rows=response.json(),
                fields=fields,
                after=after,
                next_cursor=response.headers.get("X-Next-Cursor"),
                actions=ACTIONS,
                since_choices=list(SINCE),
                url=lambda **c: url(fields, **c),
            )

        return await answer(console, request, page)
