"""The executions list's filters and its paging, in one place: every filter and the
page cursor go to ``GET /executions`` as they are (keyset pages, the next cursor in
``X-Next-Cursor``: docs/history.md), so a console page costs the server what one API
page does, however long the history."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from urllib.parse import urlencode

from fastapi import Request

from flux.domain.events import ExecutionState
from flux.server.console.api import Api

PAGE = 25
#: The time filter's choices: executions scheduled within the last ...
SINCE = {"15m": 900, "1h": 3600, "24h": 86400, "7d": 7 * 86400}
STATES = tuple(state.value for state in ExecutionState)


@dataclass(frozen=True)
class Filters:
    state: str = ""
    workflow: str = ""
    worker: str = ""
    schedule: str = ""
    since: str = ""

    @classmethod
    def of(cls, query) -> "Filters":  # noqa: ANN001 - request.query_params
        state = query.get("state", "").upper()
        return cls(
            state=state if state in STATES else "",
            workflow=query.get("workflow", "")[:128],
            worker=query.get("worker", "")[:128],
            schedule=query.get("schedule", "")[:128],
            since=query.get("since", "") if query.get("since", "") in SINCE else "",
        )

    @classmethod
    async def of_request(cls, request: Request) -> "Filters":
        """The dependency the executions list's route takes."""
        return cls.of(request.query_params)

    def url(self, **changes: str) -> str:
        """This view's URL with ``changes`` (empty values dropped): what links and the live list use."""
        fields = {k: v for k, v in {**asdict(self), **changes}.items() if v}
        return "/ui/executions" + (f"?{urlencode(fields)}" if fields else "")


async def page_of_executions(api: Api, filters: Filters, after: str, size: int = PAGE) -> tuple[list[dict], str | None]:
    """One page, newest first, and the cursor of the next one (None: the last page)."""
    params = {
        "state": filters.state,
        "workflow": filters.workflow,
        "worker": filters.worker,
        "schedule": filters.schedule,
        "limit": size,
        "after": after,
    }
    if filters.since:
        params["since"] = time.time() - SINCE[filters.since]
    response = await api.call("GET", "/executions", params)
    return response.json(), response.headers.get("X-Next-Cursor")
