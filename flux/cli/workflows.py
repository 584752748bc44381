"""``flux workflow ...``: register, inspect and run workflows."""

from __future__ import annotations

import json
import sys
import time

import click

from flux.cli.core import FiniteRange, Output, UsageProblem, client_command, renders
from flux.cli.output import ago, render_record, render_rows
from flux.cli.watch import exit_code, watch
from flux.client import FluxClient, FluxClientError
from flux.domain.ids import SHORT_ID
from flux.domain.resource_request import ResourceRequest


@click.group("workflow")
def workflow_group() -> None:
    """Register, inspect and run workflows."""


def requests_text(requests: dict | None) -> str:
    """A workflow's requests as people write them: ``cpu=2, memory=512Mi``."""
    return ResourceRequest.from_dict(requests).describe() if requests else "-"


def _render_workflows(rows: list[dict]) -> None:
    shown = [
        {
            **row,
            "requests": requests_text(row.get("requests")),
            "affinity": affinity_text(row.get("affinity")),
            "created": ago(row.get("created_at")),
        }
        for row in rows
    ]
    # the age goes first where 80 columns are too few; affinity where no workflow has one
    render_rows(
        ["name", "version", "requests", "affinity", "created"], shown, whole=("name",), optional=("created", "affinity")
    )


def affinity_text(affinity: dict | None) -> str:
    """Affinity terms as ``key=value`` (an operator term as ``key:{...}``)."""
    if not affinity:
        return "-"
    return " ".join(
        f"{key}={value}" if isinstance(value, str) else f"{key}:{json.dumps(value)}" for key, value in affinity.items()
    )


@workflow_group.command("register")
@click.argument("path", type=click.Path())
@click.option(
    "--requirements/--no-requirements",
    default=True,
    show_default=True,
    help="Turn the bundle's requirements.txt / pyproject.toml dependencies into package constraints",
)
@client_command
@renders(_render_workflows)
def workflow_register(client: FluxClient, path: str, requirements: bool) -> list[dict]:
    """Register every @workflow under PATH: a .py file, a directory (a project: its
    modules and data files, minus .gitignore/.fluxignore), or a .zip/.whl.

    The workflows are read from the source, never run: registering needs none of
    their dependencies. Changed content makes a new version of each workflow."""
    registered = client.register(path, requirements=requirements)
    for workflow in registered:
        for warning in workflow.get("warnings", []):
            click.echo(f"Warning: workflow {workflow['name']!r}: {warning}", err=True)
    return registered


@workflow_group.command("list")
@client_command
@renders(_render_workflows)
def workflow_list(client: FluxClient) -> list[dict]:
    """List registered workflows (newest version of each)."""
    return client.list_workflows()


def _render_versions(rows: list[dict]) -> None:
    shown = [
        {
            **row,
            "bundle": (row.get("bundle") or "")[:12],  # a short hash, like git
            "requests": requests_text(row.get("requests")),
            "created": ago(row.get("created_at")),
        }
        for row in rows
    ]
    # where 80 columns are too few: the file's path goes first (the widest, the least needed), then the age, the hash
    render_rows(
        ["name", "version", "bundle", "requests", "created", "filename"],
        shown,
        whole=("name", "bundle"),
        optional=("filename", "created", "bundle"),
    )


@workflow_group.command("versions")
@click.argument("name")
@client_command
@renders(_render_versions)
def workflow_versions(client: FluxClient, name: str) -> list[dict]:
    """List every version of workflow NAME, oldest first; run one with NAME@VERSION."""
    return client.workflow_versions(name)


def readable(record: dict) -> dict:
    """A record with its requests and affinity as people write them (``cpu=1, memory=256Mi``,
    the one form every table and summary uses), not as stored (``268435456``)."""
    shown = dict(record)
    if record.get("requests"):
        shown["requests"] = requests_text(record["requests"])
    if record.get("affinity"):
        shown["affinity"] = affinity_text(record["affinity"])
    return shown


@workflow_group.command("show")
@click.argument("name")
@click.option("--version", type=click.IntRange(1), default=None, help="Show this version [the newest]")
@client_command
@renders(lambda record: render_record(readable(record)))
def workflow_show(client: FluxClient, name: str, version: int | None) -> dict:
    """Show a workflow (NAME, or NAME@VERSION), its resource requests and affinity."""
    return client.show_workflow(name, version)


def parse_input(text: str) -> object:
    """INPUT: JSON, or @FILE holding JSON, or - for JSON on stdin."""
    where = "INPUT"
    if text == "-" or text.startswith("@"):
        where = "stdin" if text == "-" else text[1:]
        try:
            text = sys.stdin.read() if text == "-" else open(text[1:], encoding="utf-8").read()  # noqa: SIM115
        except OSError as exc:
            raise UsageProblem(f"cannot read INPUT from {where}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise UsageProblem(f"{where} is not valid JSON ({exc.msg} at position {exc.pos}): {shown!r}") from None


def _priority(text: str | None) -> int | str | None:
    """``--priority``: an int stays an int; a class name is checked by the server."""
    from flux.domain.priority import check_priority

    try:
        return check_priority(text, "--priority")
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None


#: How long ``workflow run`` without ``--wait`` waits for the dispatcher's first look at its run.
FIRST_LOOK = 3.0


def warn_if_never_placed(client: FluxClient, execution: dict) -> None:
    """A run that no registered worker could ever take is said so on stderr, as its
    registration was (it stays queued: a fitting worker may yet register). The dispatcher's
    first round over it says so (``unschedulable``); it is waited for, ``FIRST_LOOK`` at most."""
    deadline = time.monotonic() + FIRST_LOOK
    try:
        while execution.get("state") == "SCHEDULED" and not execution.get("placement_note"):
            if time.monotonic() >= deadline:
                return
            time.sleep(0.05)
            execution = client.execution(execution["id"])
    except FluxClientError:
        return  # the run itself succeeded; the warning is a courtesy
    if execution.get("state") == "SCHEDULED" and execution.get("unschedulable"):
        short = execution["id"][:SHORT_ID]
        click.echo(
            f"Warning: execution {short} can never be placed as the fleet stands: {execution['unschedulable']}; "
            f"it waits for a worker that fits ('flux execution explain {short}')",
            err=True,
        )


@workflow_group.command("run")
@click.argument("name")
@click.argument("input", default="null")
@click.option(
    "--wait/--no-wait",
    default=False,
    help="Follow the execution until it ends; exit 0 COMPLETED, 1 FAILED, 3 CANCELLED, 4 still running at --timeout",
)
@click.option(
    "--timeout", type=FiniteRange(min=0), default=300.0, show_default=True, help="Seconds to wait with --wait"
)
@click.option(
    "--logs", is_flag=True, help="Print the execution's output and log lines while waiting, on stderr (implies --wait)"
)
@click.option(
    "--priority",
    default=None,
    help="This run's priority: a class name (critical, high, default, low, batch) or an int [the workflow's]",
)
@click.option(
    "--gang-size",
    type=click.IntRange(min=2),
    default=None,
    metavar="N",
    help="Run the workflow's gang with N members (its topology and the rest as declared; docs/gangs.md)",
)
@client_command
def workflow_run(
    client: FluxClient,
    name: str,
    input: str,
    wait: bool,
    timeout: float,
    logs: bool,
    priority: str | None,
    gang_size: int | None,
) -> object:
    """Start workflow NAME (its newest version, or NAME@3 for version 3) with INPUT:
    JSON, @FILE holding JSON, or - for stdin [null]. The execution keeps its version.

    With --wait, progress goes to stderr (a live line on a terminal) and the final
    record to stdout."""
    gang = None if gang_size is None else {"size": gang_size}
    execution = client.run(name, parse_input(input), priority=_priority(priority), gang=gang)
    if not (wait or logs):
        warn_if_never_placed(client, execution)
        return execution
    final = watch(client, execution, timeout, logs)
    return Output(final, exit_code=exit_code(final["state"]))
