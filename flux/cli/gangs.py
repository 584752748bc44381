"""Gangs in ``flux execution ...`` (docs/gangs.md): a gang's members under ``show``, the
member ``logs --rank N`` reads, the domains ``explain`` names.

A gang's own row is what a person started and finds in lists; its members (one
execution each, by rank) are where the work runs, so each command that shows a gang
shows its members by rank, and each that reads one member's output (logs) takes a rank.
"""

from __future__ import annotations

import click

from flux.cli.core import UsageProblem
from flux.cli.output import console, render_rows
from flux.domain.ids import unique_prefixes

MEMBER_COLUMNS = ["rank", "id", "worker", "attempt", "state"]


def member_rows(members: list[dict]) -> list[dict]:
    """A gang's members as table rows: rank, id (its shortest unique prefix), worker, attempt, state."""
    prefixes = unique_prefixes(m["id"] for m in members)
    return [
        {
            "rank": m["rank"],
            "id": prefixes[m["id"]],
            "worker": m.get("worker_name"),
            "attempt": m.get("attempt"),
            "state": m.get("state"),
        }
        for m in members
    ]


def render_members(execution: dict) -> None:
    """Under ``flux execution show`` of a gang: its shape and its members by rank; of a
    member: which gang and rank it is."""
    gang, members = execution.get("gang"), execution.get("members")
    if gang:
        shape = f"gang of {gang['size']} in one {gang['topology']}"
        shape += f", as few {gang['prefer']} as possible" if gang.get("prefer") else ""
        shape += f", up to {gang['per_worker']} a worker" if gang.get("per_worker", 1) > 1 else ""
        console.print(f"[bold]{shape}[/] (flux execution logs {execution['id'][:12]} --rank N)", highlight=False)
        render_rows(MEMBER_COLUMNS, member_rows(members or []), whole=("rank", "id", "worker"))
    elif execution.get("gang_id"):
        console.print(f"[bold]rank {execution['rank']} of gang {execution['gang_id']}[/]", highlight=False)


def logs_target(execution: dict, rank: int | None) -> str:
    """The execution whose log ``flux execution logs`` reads: a gang's member of ``rank``,
    rank 0's when no rank is given (the gang's output is rank 0's; a note on stderr says
    which ranks exist), the execution itself otherwise."""
    members = execution.get("members")
    if not execution.get("gang") or members is None:
        if rank is not None:
            raise UsageProblem(f"--rank: execution {execution['id']} is not a gang")
        return execution["id"]
    if not members:
        raise UsageProblem(f"gang {execution['id']} has no members")
    if rank is None:
        click.echo(
            f"gang of {len(members)}: rank 0's log (--rank 0 to {len(members) - 1} for another member's)", err=True
        )
        rank = 0
    found = next((m for m in members if m["rank"] == rank), None)
    if found is None:
        raise UsageProblem(f"--rank: gang {execution['id']} has ranks 0 to {len(members) - 1}, not {rank}")
    return found["id"]


def render_gang_explain(gang: dict | None) -> None:
    """Under ``flux execution explain`` of a gang: each topology domain's line (what its
    workers hold of the gang, why not more), then its members."""
    if not gang:
        return
    for line in gang.get("domains") or ():
        console.print(f"  {line}", markup=False, highlight=False)
    if gang.get("members"):
        console.print("[bold]members:[/]")
        render_rows(MEMBER_COLUMNS, member_rows(gang["members"]), whole=("rank", "id", "worker"))
