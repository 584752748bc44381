"""The console's pages: each reads the API (``Api``) and renders one template, so it
reads without JavaScript; every view and filter is a URL with a query string. The
routes (``routes``) hand each its ``Visit`` and its typed query."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import get_args
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import FileResponse, RedirectResponse
from starlette.responses import Response

from flux.domain.access import Action
from flux.domain.events import TERMINAL_EVENTS, ExecutionState
from flux.protocol.failures import Failure
from flux.server.console import charts
from flux.server.console.api import Api
from flux.server.console.base import Visit
from flux.server.console.gantt import gantt, members_gantt, task_failures
from flux.server.console.paging import SINCE, STATES, Filters, page_of_executions
from flux.server.schedules.schemas import CatchUp, Overlap

STATIC = Path(__file__).parent / "static"
#: Lines of an execution's log a page shows before "more".
LOG_PAGE = 1000
#: Recent runs per workflow behind its success rate.
RECENT = 20
#: Deliveries the hooks page shows per hook.
HOOK_DELIVERIES = 10
#: Runs a workflow's charts are drawn from (one page of the history).
CHARTED = 200
LOG_FILTERS = ("task", "stream", "level", "attempt", "after")
#: An execution's id, and what may be a prefix of one (a unique one leads to it).
FULL_ID, HEX = re.compile(r"[0-9a-f]{32}"), re.compile(r"[0-9a-fA-F]{1,31}")


def label_matches(labels: dict[str, str], wanted: list[str]) -> bool:
    """``key=value`` must be equal; a bare ``key`` must be present."""
    for term in wanted:
        key, eq, value = term.partition("=")
        if key.strip() not in labels or (eq and labels[key.strip()] != value.strip()):
            return False
    return True


def success_rate(runs: list[dict]) -> float | None:
    ended = [run for run in runs if ExecutionState(run["state"]).is_terminal]
    if not ended:
        return None
    return sum(run["state"] == ExecutionState.COMPLETED for run in ended) / len(ended)


async def fleet(visit: Visit, label: list[str]) -> Response:
    if not visit.may(Action.READ_FLEET):  # a token of a few namespaces sees no fleet
        return RedirectResponse("/ui/executions", status_code=303)
    wanted = [term for term in label if term.strip()]
    async with visit.api() as client:
        workers, summary, history = await asyncio.gather(
            client.get("/workers"), client.get("/fleet"), client.get("/fleet/history")
        )
        pools = await client.get("/pools")  # worker pools (docs/autoscaling.md)
    shown = [w for w in workers if label_matches(w["labels"], wanted)]
    labels = sorted({f"{k}={v}" for w in workers for k, v in w["labels"].items()})
    return visit.render(
        "fleet.html",
        title="Fleet",
        active="fleet",
        workers=shown,
        summary=summary,
        charts=charts.fleet_charts(history["points"]),
        pools=pools,
        total=len(workers),
        wanted=wanted,
        labels=labels,
        now=time.time(),
    )


async def execution_list(visit: Visit, filters: Filters, after: str) -> Response:
    async with visit.api() as client:
        cursor = (await client.get("/watch/executions"))["cursor"]  # the list follows from here: no change missed
        items, next_cursor = await page_of_executions(client, filters, after)
        workflows = await client.get("/workflows")
    return visit.render(
        "executions.html",
        title="Executions",
        active="executions",
        executions=items,
        filters=filters,
        after=after,
        next_cursor=next_cursor,
        cursor=cursor,
        states=STATES,
        since_choices=list(SINCE),
        workflow_names=[w["name"] for w in workflows],
        now=time.time(),
    )


async def execution(visit: Visit, execution_id: str, log_filters: dict[str, str]) -> Response:
    async with visit.api() as client:
        if not FULL_ID.fullmatch(execution_id) and HEX.fullmatch(execution_id):  # a prefix, as the CLI takes
            found = await client.get("/executions", id_prefix=execution_id.lower(), limit=2)
            if len(found) == 1:
                return RedirectResponse(f"/ui/executions/{found[0]['id']}", status_code=307)
        execution, events, placement = await _execution_and_events(client, execution_id)
        logs = await client.get(f"/executions/{execution_id}/logs", limit=LOG_PAGE, **log_filters)
    now = time.time()
    return visit.render(
        "execution.html",
        title=f"Execution {execution_id[:12]}",
        active="executions",
        execution=execution,
        events=events,
        placement=placement,
        logs=logs,
        log_filters=log_filters,
        chart=gantt(events, now),
        members_chart=members_gantt(execution["members"], now) if execution.get("members") else None,
        now=now,
        terminal=ExecutionState(execution["state"]).is_terminal,
        failure=Failure.parsed(execution),
        task_failures=task_failures(events),
        tasks=sorted({e["name"] for e in events if e["type"] == "TASK_STARTED" and e.get("name")}),
    )


async def log_filters(request: Request) -> dict[str, str]:
    """The execution page's log filters, from its query string (each '' when not given)."""
    return {key: request.query_params.get(key, "") for key in LOG_FILTERS}


async def recent_runs(client: Api, name: str) -> list[dict]:
    return await client.get("/executions", workflow=name, limit=RECENT)


async def workflow_list(visit: Visit) -> Response:
    async with visit.api() as client:
        workflows = await client.get("/workflows")
        runs = await asyncio.gather(*(recent_runs(client, w["name"]) for w in workflows))
    rows = [{"workflow": w, "runs": r, "rate": success_rate(r)} for w, r in zip(workflows, runs)]
    return visit.render("workflows.html", title="Workflows", active="workflows", rows=rows, now=time.time())


async def workflow(visit: Visit, name: str) -> Response:
    async with visit.api() as client:
        info, runs, history = await asyncio.gather(
            client.get(f"/workflows/{name}"),
            recent_runs(client, name),
            client.get("/executions", workflow=name, limit=CHARTED),
        )
    return visit.render(
        "workflow.html",
        title=f"Workflow {name}",
        active="workflows",
        workflow=info,
        runs=runs,
        rate=success_rate(runs),
        now=time.time(),
        input_text="",
        problem=None,
        histogram=charts.duration_histogram(history),
        outcomes=charts.outcomes(history),
        success=charts.success_over_time(history),
    )


async def schedule_list(visit: Visit) -> Response:
    async with visit.api() as client:
        items, workflows = await asyncio.gather(client.get("/schedules"), client.get("/workflows"))
    return visit.render(
        "schedules.html",
        title="Schedules",
        active="schedules",
        schedules=items,
        workflows=workflows,
        overlaps=get_args(Overlap),
        catch_ups=get_args(CatchUp),
        now=time.time(),
    )


async def hook_list(visit: Visit) -> Response:
    """Each hook, and its newest deliveries with their attempts (docs/hooks.md)."""
    async with visit.api() as client:
        hooks = await client.get("/hooks")
        deliveries = await asyncio.gather(
            *(client.get(f"/hooks/{quote(h['name'], safe='')}/deliveries") for h in hooks)
        )
    rows = [{"hook": h, "deliveries": d[:HOOK_DELIVERIES]} for h, d in zip(hooks, deliveries)]
    return visit.render("hooks.html", title="Hooks", active="hooks", rows=rows, now=time.time())


def static(name: str) -> Response:
    """A file of the package's ``static/`` (and nothing else)."""
    if name not in {path.name for path in STATIC.iterdir()}:
        return Response(status_code=404)
    return FileResponse(STATIC / name, headers={"Cache-Control": "public, max-age=300"})


async def _execution_and_events(client: Api, execution_id: str) -> tuple[dict, list[dict], dict]:
    """The log first, then the row: the page follows the log from its last event, so a
    change committed between the two reads reaches it on the stream (read the other way
    round, a WORKFLOW_STARTED that landed in between was in neither, and the header said
    CLAIMED until the end). A row that ended after the log was read has its whole log
    read again: a finished page follows nothing."""
    events = await client.get(f"/executions/{execution_id}/events")
    execution, placement = await asyncio.gather(
        client.get(f"/executions/{execution_id}"),
        client.get(f"/executions/{execution_id}/placement"),
    )
    if ExecutionState(execution["state"]).is_terminal and not any(e["type"] in TERMINAL_EVENTS for e in events):
        events = await client.get(f"/executions/{execution_id}/events")
    return execution, events, placement
