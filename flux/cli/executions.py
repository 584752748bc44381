"""``flux execution ...``: inspect, follow and cancel executions. Every ID may be a
unique prefix of it (``FluxClient.resolve_execution``)."""

from __future__ import annotations

import json
import time

import click

from flux.cli.core import DURATION, Output, UsageProblem, client_command, execution_id_argument, renders
from flux.cli.gangs import logs_target, render_gang_explain, render_members
from flux.cli.output import ago, cell, console, render_record, render_rows, when
from flux.cli.watch import brief, event_line, follow, log_line, stamp
from flux.cli.workflows import parse_input, readable
from flux.client import FluxClient
from flux.domain.events import ExecutionState
from flux.domain.ids import MIN_ACTION_PREFIX, unique_prefixes
from flux.protocol.failures import Failure

STATES = [state.value for state in ExecutionState]
LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
STREAMS = ["stdout", "stderr", "log", "flux"]
FOLLOW_HELP = "Keep printing as they arrive until the execution has ended (Ctrl-C stops)"


@click.group("execution")
def execution_group() -> None:
    """Inspect, follow and cancel executions (an ID may be any unique prefix of it)."""


LIST_COLUMNS = ["id", "workflow_name", "state", "worker_name", "scheduled_at", "schedule"]


def shown(execution: dict) -> dict:
    """A list row for people: a paused execution's state names its pause (``PAUSED: approval``)."""
    wait = execution.get("wait") or {}
    if execution.get("state") == "PAUSED" and wait.get("name"):
        return {**execution, "state": f"PAUSED: {wait['name']}"}
    return execution


#: The list's table for people: header -> field, the API's names kept for JSON. An id is
#: its shortest unique prefix of 12 or more (as the console shows it), names are never cut,
#: the time is an age (as ``kubectl get``), and what does not fit 80 columns goes first:
#: the schedule (left out when no row has one), the age, the worker.
TABLE = {
    "id": "id",
    "workflow": "workflow_name",
    "state": "state",
    "worker": "worker_name",
    "age": "scheduled_at",
    "schedule": "schedule",
}
WHOLE = ("id", "workflow", "worker")
OPTIONAL = ("schedule", "age", "worker")


def table_rows(executions: list[dict]) -> list[dict]:
    prefixes = unique_prefixes(e["id"] for e in executions)
    rows = []
    for execution in executions:
        row = {header: shown(execution).get(key) for header, key in TABLE.items()}
        rows.append({**row, "id": prefixes[execution["id"]], "age": ago(execution.get("scheduled_at"), suffix="")})
    return rows


def execution_line(execution: dict) -> str:
    """One execution per line (``list --all``): the table's columns, tab-separated."""
    execution = shown(execution)
    return "\t".join(when(execution[c]) if c.endswith("_at") else cell(execution.get(c)) for c in LIST_COLUMNS)


@execution_group.command("list")
@click.option(
    "--state", type=click.Choice(STATES, case_sensitive=False), default=None, help="Only executions in this state"
)
@click.option("--workflow", default=None, help="Only executions of this workflow")
@click.option("--worker", default=None, help="Only executions placed on this worker")
@click.option("--schedule", default=None, help="Only the runs this schedule started")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Newest executions to list (one page)"
)
@click.option("--after", default=None, metavar="CURSOR", help="The page after this cursor (printed under a full page)")
@click.option(
    "--all",
    "all_",
    is_flag=True,
    help="Every matching execution, page after page, one line each (JSON lines with --format json)",
)
@click.option(
    "--include", type=click.Choice(["input", "output"]), multiple=True, help="Carry this payload too (repeatable)"
)
@click.option("--members", is_flag=True, help="Gang members too (by default a gang's show lists them)")
@client_command
def execution_list(
    client: FluxClient,
    state: str | None,
    workflow: str | None,
    worker: str | None,
    schedule: str | None,
    limit: int,
    after: str | None,
    all_: bool,
    include: tuple[str, ...],
    members: bool,
    fmt: str,
) -> Output | None:
    """List executions, newest first, a page at a time (a gang's members under its show)."""
    if all_:
        follow(
            client.iter_executions(
                state, workflow, worker=worker, schedule=schedule, include=include, after=after, members=members
            ),
            execution_line,
            fmt,
        )
        return None
    rows, cursor = client.list_executions_page(
        state, workflow, limit, worker=worker, schedule=schedule, after=after, include=include, members=members
    )

    def render(rows: list[dict]) -> None:
        render_rows(list(TABLE), table_rows(rows), whole=WHOLE, optional=OPTIONAL)
        if cursor:
            click.echo(f"more: --after {cursor}", err=True)

    return Output(rows, render)


@execution_group.command("prune")
@click.option(
    "--older-than", required=True, type=DURATION, help="Delete executions that finished longer ago than this (e.g. 30d)"
)
@client_command
def execution_prune(client: FluxClient, older_than: float) -> dict:
    """Delete finished executions older than a cut-off, with their events and logs."""
    return client.prune_executions(older_than)


#: Fields ``show`` prints below its record rather than in it.
SHOWN_APART = ("failure", "gang", "members")


@execution_group.command("show")
@execution_id_argument
@click.option("--full", is_flag=True, help="A failure's whole traceback, Flux's and the standard library's frames too")
@client_command
def execution_show(client: FluxClient, execution_id: str, full: bool) -> Output:
    """Show an execution's state, output and placement; a failure's traceback, user frames
    first; a gang's members by rank."""
    execution = client.execution(client.resolve_execution(execution_id))

    def render(record: dict) -> None:
        render_record(readable({key: value for key, value in record.items() if key not in SHOWN_APART}))
        render_members(record)
        failure = Failure.parsed(record)
        if failure is not None:
            console.print(failure.rendered(full=full), markup=False, highlight=False, soft_wrap=True)

    return Output(execution, render)


def event_row(event: dict) -> dict:
    """An event as a row for people: its time of day (to the millisecond) and its value
    without the traceback (``flux execution show ID`` prints it)."""
    value = brief(event.get("value"))
    text = (
        value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "), default=str)
    )  # spaces: it wraps
    return {**event, "time": stamp(event.get("time"))[11:], "value": text if value is not None else "-"}


@execution_group.command("events")
@execution_id_argument
@click.option("--follow", "-f", "follow_", is_flag=True, help=FOLLOW_HELP)
@client_command
@renders(
    lambda rows: render_rows(
        ["seq", "time", "type", "task_id", "value"], [event_row(row) for row in rows], whole=("seq", "time", "type")
    )
)
def execution_events(client: FluxClient, execution_id: str, follow_: bool, fmt: str) -> list[dict] | None:
    """Show an execution's event log (with --follow: one line per event, JSON lines with --format json)."""
    execution_id = client.resolve_execution(execution_id)
    if not follow_:
        return client.events(execution_id)
    follow(client.follow_events(execution_id), event_line, fmt)
    return None


@execution_group.command("logs")
@execution_id_argument
@click.option("--follow", "-f", "follow_", is_flag=True, help=FOLLOW_HELP)
@click.option("--task", default=None, help="Only lines written inside this task: a name (fetch) or a call id (fetch:2)")
@click.option("--attempt", type=click.IntRange(1), default=None, help="Only lines of this attempt")
@click.option(
    "--rank", type=click.IntRange(0), default=None, help="A gang's member of this rank (a gang's default: rank 0)"
)
@click.option(
    "--stream", type=click.Choice(STREAMS), default=None, help="Only this stream (log: Python logging records)"
)
@click.option(
    "--level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default=None,
    help="Only logging records at this level or above",
)
@client_command
def execution_logs(
    client: FluxClient,
    execution_id: str,
    follow_: bool,
    task: str | None,
    attempt: int | None,
    rank: int | None,
    stream: str | None,
    level: str | None,
    fmt: str,
) -> None:
    """Print what an execution printed and logged: 'time [stream] task: message' lines
    (JSON lines with --format json), like 'kubectl logs [-f]'. A gang's: one member's,
    --rank N (rank 0's by default)."""
    execution_id = client.resolve_execution(execution_id)
    execution_id = logs_target(client.execution(execution_id), rank)  # a gang's log is its members'
    filters = dict(task=task, attempt=attempt, stream=stream, level=level and level.upper())
    lines = client.follow_logs(execution_id, **filters) if follow_ else client.logs(execution_id, **filters)
    follow(lines, log_line, fmt)


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def _render_queue(queue: dict | None) -> None:
    """Priority, place in the namespace's queue, quota use, what holds it back (docs/contention.md)."""
    if not queue:
        return
    priority = f"{queue['priority']}" + (f" ({queue['priority_class']})" if queue.get("priority_class") else "")
    where = f"; position {queue['position']} in its namespace's queue" if queue.get("position") else ""
    console.print(f"[bold]priority:[/] {priority}{where}; {queue['higher_waiting']} of higher priority waiting")
    if queue.get("quota"):
        used = ", ".join(f"{name} {queue['held'].get(name, 0):g}/{limit:g}" for name, limit in queue["quota"].items())
        console.print(f"[bold]quota:[/] {used}")
    if queue.get("note"):
        console.print(f"[bold]last round:[/] {queue['note']}")
    for victim, deadline in (queue.get("preempting") or {}).items():
        console.print(f"[yellow]preempting {victim}:[/] its attempt ends at {_clock(deadline)}")
    if queue.get("preempted_by"):
        console.print(
            f"[yellow]preempted by {queue['preempted_by']}:[/] its attempt ends at {_clock(queue['preempt_deadline'])}"
        )


def _render_placement(info: dict) -> None:
    console.print(f"[bold]{info['summary']}[/]")
    if info.get("unschedulable"):
        console.print(f"[red]unschedulable:[/] {info['unschedulable']}")
    _render_queue(info.get("queue"))
    render_gang_explain(info.get("gang"))
    render_rows(["name", "state", "available", "reason"], info["workers"])
    attempts = info.get("attempts") or []
    if attempts:
        console.print(
            f"[bold]attempts:[/] {len(attempts)} used; {info['crashes']} of {info['max_attempts']} allowed crashes"
        )
        for a in attempts:
            how = f"{a['end']}: {a['cause']}" if a.get("end") else "running"
            console.print(
                f"  attempt {a['attempt']} on {a['worker']}: {how}" + (" \\[counted]" if a.get("counted") else "")
            )


@execution_group.command("explain")
@execution_id_argument
@client_command
@renders(_render_placement)
def execution_explain(client: FluxClient, execution_id: str) -> dict:
    """Why is it pending? Each worker's verdict, or why the chosen worker won."""
    return client.placement(client.resolve_execution(execution_id))


@execution_group.command("cancel")
@execution_id_argument
@client_command
def execution_cancel(client: FluxClient, execution_id: str) -> dict:
    """Cancel an execution and its children (at once if queued or waiting; its worker stops it if running)."""
    return client.cancel(acted_on(client, execution_id, "cancel"))


def acted_on(client: FluxClient, execution_id: str, verb: str) -> str:
    """The execution a command that changes something means: a prefix of at least
    ``MIN_ACTION_PREFIX`` characters, so that one stray key cannot pick another run."""
    if len(execution_id) < MIN_ACTION_PREFIX:
        raise UsageProblem(
            f"ID {execution_id!r} is too short to {verb}: give at least {MIN_ACTION_PREFIX} characters of the id"
        )
    return client.resolve_execution(execution_id)


@execution_group.command("resume")
@execution_id_argument
@click.option(
    "--input",
    "input_",
    default="null",
    metavar="JSON",
    help="What the workflow's pause() returns: JSON, @FILE holding JSON, or - for stdin [null]",
)
@client_command
def execution_resume(client: FluxClient, execution_id: str, input_: str) -> dict:
    """Continue a PAUSED execution (docs/waits.md)."""
    return client.resume(acted_on(client, execution_id, "resume"), parse_input(input_))
