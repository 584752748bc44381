"""``flux schedule ...``: run a workflow on cron, every interval, or once at a time
(docs/schedules.md). Timing is checked here with the domain's parsers before anything
is sent; the server checks it again."""

from __future__ import annotations

import click

from flux.cli.core import FiniteRange, UsageProblem, client_command, renders
from flux.cli.output import console, render_record, render_rows
from flux.cli.workflows import parse_input
from flux.client import FluxClient
from flux.domain.durations import format_duration
from flux.domain.schedules import CatchUpPolicy, InvalidSchedule, OverlapPolicy, Schedule

OVERLAP = click.Choice([p.value for p in OverlapPolicy])
CATCH_UP = click.Choice([p.value for p in CatchUpPolicy])
COLUMNS = ["name", "workflow", "kind", "when", "timezone", "overlap", "paused", "next"]


@click.group("schedule")
def schedule_group() -> None:
    """Run workflows on cron, every interval, or once at a time, exactly once per due time."""


def _row(schedule: dict) -> dict:
    when = schedule["cron"] or (
        f"every {format_duration(schedule['every'])}" if schedule["every"] else f"at {schedule['at']}"
    )
    upcoming = schedule["next_fire_times"]
    return {**schedule, "when": when, "next": upcoming[0] if upcoming else "-"}


def _render_one(schedule: dict) -> None:
    render_record({k: v for k, v in schedule.items() if k != "next_fire_times"})
    upcoming = schedule["next_fire_times"]
    console.print("[bold]next fire times:[/] " + (", ".join(upcoming) if upcoming else "none (paused or done)"))


def _checked(cron: str | None, every: str | None, at: str | None, anchor: str | None, timezone: str) -> None:
    try:
        Schedule.parse(cron=cron, every=every, at=at, anchor=anchor, timezone=timezone)
    except InvalidSchedule as exc:
        raise UsageProblem(str(exc)) from None


def _timing_options(fn):  # noqa: ANN001, ANN202
    for option in reversed(
        [
            click.option(
                "--cron", default=None, help="Cron: 5 fields, 6 (seconds first), or @hourly, @daily, @weekly, ..."
            ),
            click.option("--every", default=None, help="An interval: seconds or a duration such as 30s, 5m, 1h30m"),
            click.option("--at", default=None, help="Once, at this ISO 8601 time (without an offset: in --timezone)"),
            click.option("--anchor", default=None, help="With --every: a time on its grid [the Unix epoch]"),
            click.option("--input", "input_", default=None, help="The runs' input: JSON, @FILE or - for stdin"),
            click.option(
                "--version",
                "version",
                type=click.IntRange(1),
                default=None,
                help="A workflow version [the newest at each fire]",
            ),
            click.option("--overlap", type=OVERLAP, default=None, help="While the previous run is active [skip]"),
            click.option(
                "--catch-up", type=CATCH_UP, default=None, help="Due times missed while no server ran [latest]"
            ),
            click.option(
                "--catch-up-limit",
                type=click.IntRange(1, 1000),
                default=None,
                help="With --catch-up all: the most fired [100]",
            ),
            click.option(
                "--jitter", type=FiniteRange(0, 3600), default=None, help="Fire up to this many seconds after due [0]"
            ),
            click.option(
                "--priority", default=None, help="The runs' priority: a class name or an int [the workflow's]"
            ),
        ]
    ):
        fn = option(fn)
    return fn


def _options(input_, **fields) -> dict:  # noqa: ANN001
    given = {k: v for k, v in fields.items() if v is not None}
    if input_ is not None:
        given["input"] = parse_input(input_)
    return given


@schedule_group.command("create")
@click.argument("name")
@click.argument("workflow")
@_timing_options
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone of the cron grid and of --at")
@click.option("--paused", is_flag=True, help="Create it paused")
@client_command
@renders(_render_one)
def schedule_create(
    client: FluxClient, name: str, workflow: str, cron, every, at, anchor, timezone, paused, input_, **rest
) -> dict:  # noqa: ANN001
    """Create schedule NAME that runs WORKFLOW: give one of --cron, --every and --at."""
    _checked(cron, every, at, anchor, timezone)
    options = _options(input_, anchor=anchor, timezone=timezone, paused=paused or None, **rest)
    return client.create_schedule(name, workflow, cron=cron, every=every, at=at, **options)


@schedule_group.command("update")
@click.argument("name")
@_timing_options
@click.option("--workflow", default=None, help="Run another workflow")
@click.option("--timezone", default=None, help="IANA time zone")
@client_command
@renders(_render_one)
def schedule_update(client: FluxClient, name: str, cron, every, at, anchor, timezone, input_, **rest) -> dict:  # noqa: ANN001
    """Change what is given; a change of timing counts the next due time from now."""
    if sum(v is not None for v in (cron, every, at)) > 1:
        raise UsageProblem("give at most one of --cron, --every and --at")
    changes = _options(input_, cron=cron, every=every, at=at, anchor=anchor, timezone=timezone, **rest)
    if not changes:
        raise UsageProblem("nothing to change: give an option (see --help)")
    return client.update_schedule(name, **changes)


@schedule_group.command("list")
@client_command
@renders(lambda rows: render_rows(COLUMNS, [_row(r) for r in rows]))
def schedule_list(client: FluxClient) -> list[dict]:
    """List schedules and when each fires next (--format json: the next few times)."""
    return client.list_schedules()


@schedule_group.command("show")
@click.argument("name")
@client_command
@renders(_render_one)
def schedule_show(client: FluxClient, name: str) -> dict:
    """Show a schedule and its next fire times."""
    return client.show_schedule(name)


@schedule_group.command("pause")
@click.argument("name")
@client_command
@renders(_render_one)
def schedule_pause(client: FluxClient, name: str) -> dict:
    """Stop firing (a held overlap=queue_one run is dropped)."""
    return client.pause_schedule(name)


@schedule_group.command("resume")
@click.argument("name")
@client_command
@renders(_render_one)
def schedule_resume(client: FluxClient, name: str) -> dict:
    """Fire again from the next due time (what passed while paused is not caught up)."""
    return client.resume_schedule(name)


@schedule_group.command("delete")
@click.argument("name")
@client_command
def schedule_delete(client: FluxClient, name: str) -> None:
    """Delete a schedule; the runs it started stay."""
    client.delete_schedule(name)
    console.print(f"deleted schedule {name}")


@schedule_group.command("trigger")
@click.argument("name")
@client_command
def schedule_trigger(client: FluxClient, name: str) -> dict:
    """Run it now, whatever its overlap policy or pause; prints the execution."""
    return client.trigger_schedule(name)
