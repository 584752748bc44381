"""``flux audit list``: the mutating calls the server recorded, allowed or refused
(docs/security.md#audit)."""

from __future__ import annotations

import itertools
import time

import click

from flux.cli.core import DURATION, client_command, renders
from flux.cli.output import render_rows
from flux.client import FluxClient
from flux.domain.access import Action

COLUMNS = ["time", "token", "role", "namespace", "action", "method", "target", "status", "client"]


@click.group("audit")
def audit_group() -> None:
    """The audit log: every mutating API call, who made it and how it was answered."""


@audit_group.command("list")
@click.option("--namespace", default=None, help="Only calls in this namespace")
@click.option("--token", default=None, help="Only calls with this token (its name)")
@click.option("--action", type=click.Choice([action.value for action in Action]), default=None, help="Only this action")
@click.option("--since", type=DURATION, default=None, help="Only calls in the last ... (1h, 7d)")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, help="Rows to show at most")
@client_command(namespaced=False)
@renders(
    lambda rows: render_rows(
        COLUMNS, [{**row, "time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["time"]))} for row in rows]
    )
)
def audit_list(
    client: FluxClient, namespace: str | None, token: str | None, action: str | None, since: float | None, limit: int
) -> list[dict]:
    """Newest first."""
    rows = client.iter_audit(
        namespace=namespace,
        token=token,
        action=action,
        since=time.time() - since if since else None,
        page_size=min(limit, 1000),
    )
    return list(itertools.islice(rows, limit))
