"""The executions list's filters and its paging, in one place.

Today ``GET /executions`` filters by state and workflow and returns the newest
``limit`` (at most 1,000): the console asks for that many, filters by worker, schedule
and time itself, and pages by offset. When the API pages by keyset (``limit``,
``after``, the next cursor in ``X-Next-Cursor``), ``page_of_executions`` passes
``after`` and ``limit=size`` through and returns that header: nothing else changes.
The filters it cannot pass are still applied here, so a link stays exact either way.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from urllib.parse import urlencode

from flux.server.console.api import Api

PAGE = 25
#: What the console asks of today's list: the API's maximum.
LOOKAHEAD = 1000
#: The time filter's choices: executions scheduled within the last ...
SINCE = {"15m": 900, "1h": 3600, "24h": 86400, "7d": 7 * 86400}
STATES = ("SCHEDULED", "CLAIMED", "RUNNING", "CANCELLING", "COMPLETED", "FAILED", "CANCELLED")


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

    def url(self, **changes: str) -> str:
        """This view's URL with ``changes`` (empty values dropped): what links and the live list use."""
        fields = {k: v for k, v in {**asdict(self), **changes}.items() if v}
        return "/ui/executions" + (f"?{urlencode(fields)}" if fields else "")

    def matches(self, execution: dict, now: float) -> bool:
        return (
            (not self.state or execution["state"] == self.state)
            and (not self.workflow or execution["workflow_name"] == self.workflow)
            and (not self.worker or execution.get("worker_name") == self.worker)
            and (not self.schedule or execution.get("schedule") == self.schedule)
            and (not self.since or execution["scheduled_at"] >= now - SINCE[self.since])
        )


async def page_of_executions(api: Api, filters: Filters, after: str, size: int = PAGE) -> tuple[list[dict], str | None]:
    """One page, newest first, and the cursor of the next one (None: the last page)."""
    params = {"state": filters.state, "workflow": filters.workflow, "schedule": filters.schedule, "limit": LOOKAHEAD}
    response = await api.call("GET", "/executions", params)
    now = time.time()
    found = [e for e in response.json() if filters.matches(e, now)]
    offset = int(after) if after.isdigit() else 0
    more = len(found) > offset + size
    return found[offset: offset + size], str(offset + size) if more else None
