"""``flux audit list``: the mutating calls the server recorded, allowed or refused
(docs/security.md#audit)."""

from __future__ import annotations

import itertools
import time

import click

from flux.cli.core import DURATION, client_command, renders
from flux.cli.output import render_rows, short_when
from flux.client import FluxClient
from flux.domain.access import Action

COLUMNS = ["time", "who", "namespace", "action", "status", "client", "call"]
#: Never cut (the others wrap between words).
WHOLE = ("time", "who", "namespace", "action", "status")
#: Left out when no row has one (namespace), then in this order where the terminal is too
#: narrow: the client's address, then the call (its path is the widest column, and the
#: action names what it did); ``--format json`` has every field.
OPTIONAL = ("client", "call", "namespace")


def row(entry: dict) -> dict:
    """One call as a row: the time as ``ls -l`` shows it, token and role as one column
    (``ci (developer)``), and the method with the path under its namespace."""
    namespace = entry.get("namespace")
    target = entry.get("target") or ""
    if namespace and target.startswith(f"/namespaces/{namespace}/"):
        target = target[len(f"/namespaces/{namespace}") :]
    return {
        "time": short_when(entry["time"]),
        "who": f"{entry.get('token') or '-'} ({entry['role']})" if entry.get("role") else entry.get("token") or "-",
        "namespace": namespace,
        "action": entry.get("action"),
        "status": entry.get("status"),
        "client": entry.get("client"),
        "call": f"{entry.get('method', '')} {target}".strip() or None,
    }


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
@renders(lambda entries: render_rows(COLUMNS, [row(entry) for entry in entries], whole=WHOLE, optional=OPTIONAL))
def audit_list(
    client: FluxClient, namespace: str | None, token: str | None, action: str | None, since: float | None, limit: int
) -> list[dict]:
    """Newest first: time, token (role), namespace, action, status, client, call; at 80
    columns the client and call are left out where they do not fit (--format json: every field)."""
    rows = client.iter_audit(
        namespace=namespace,
        token=token,
        action=action,
        since=time.time() - since if since else None,
        page_size=min(limit, 1000),
    )
    return list(itertools.islice(rows, limit))
