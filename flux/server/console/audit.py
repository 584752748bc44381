"""The audit log's page (``/ui/audit``): ``GET /audit``'s filters as a URL, newest
first, a keyset page at a time (docs/security.md#audit). Read only, like the API."""

from __future__ import annotations

import time
from urllib.parse import urlencode

from fastapi import Request
from starlette.responses import Response

from flux.domain.access import Action
from flux.server.console.base import Visit
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


async def fields_of(request: Request) -> dict[str, str]:
    """The page's filters, from its query string: the dependency its route takes."""
    return filters_of(request.query_params)


async def page(visit: Visit, fields: dict[str, str], after: str) -> Response:
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
    async with visit.api() as client:
        response = await client.call("GET", "/audit", params)
    return visit.render(
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
