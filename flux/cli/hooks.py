"""``flux hook create|list|show|delete|test|redeliver``: webhooks (docs/hooks.md). A
secret is read from standard input (``--secret-from-stdin``), never from the command
line, which every user of the machine can see; without one the server makes it and
this prints it once."""

from __future__ import annotations

import sys
import time

import click

from flux.cli.core import Output, UsageProblem, client_command, renders
from flux.cli.output import console, render_record, render_rows, when
from flux.client import FluxClient
from flux.domain.hooks import SUBSCRIBABLE, parse_event_types

COLUMNS = ["name", "url", "events", "workflow", "pending", "dead"]
#: Seconds ``flux hook test`` waits for the test delivery's first attempt.
TEST_WAIT = 15.0


@click.group("hook")
def hook_group() -> None:
    """Webhooks: signed POSTs to a URL on execution, schedule and worker events."""


def _row(hook: dict) -> dict:
    return {**hook, "events": ", ".join(hook["events"])}


def _render_deliveries(deliveries: list[dict]) -> None:
    rows = []
    for delivery in deliveries:
        last = delivery["attempts"][-1] if delivery["attempts"] else None
        rows.append(
            {
                "id": delivery["id"],
                "type": delivery["type"],
                "state": delivery["state"],
                "created": when(delivery["created_at"]),
                "attempts": len(delivery["attempts"]),
                "last": "-"
                if last is None
                else f"{last['status_code'] or last['error']} in {last['latency'] * 1000:.0f} ms",
            }
        )
    render_rows(["id", "type", "state", "created", "attempts", "last"], rows, title="deliveries")


def _render_hook(shown: dict) -> None:
    render_record(_row(shown["hook"]))
    if shown["hook"].get("secret"):
        console.print(f"[bold]secret[/] (shown once, keep it): {shown['hook']['secret']}")
    _render_deliveries(shown["deliveries"])


@hook_group.command("create")
@click.argument("name")
@click.option("--url", required=True, help="http(s) URL the events are POSTed to")
@click.option(
    "--event", "events", multiple=True, required=True, help=f"An event to send, repeatable: {', '.join(SUBSCRIBABLE)}"
)
@click.option("--workflow", default=None, help="Only this workflow's executions and schedules")
@click.option(
    "--secret-from-stdin", is_flag=True, help="Read the signing secret from standard input (else the server makes one)"
)
@client_command
@renders(lambda hook: _render_hook({"hook": hook, "deliveries": []}))
def hook_create(
    client: FluxClient, name: str, url: str, events: tuple[str, ...], workflow: str | None, secret_from_stdin: bool
) -> dict:
    """Subscribe URL to events of the namespace (worker.* and device.*: of the fleet)."""
    try:
        parse_event_types(events)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    secret = sys.stdin.readline().strip() if secret_from_stdin else None
    return client.create_hook(name, url, list(events), workflow=workflow, secret=secret)


@hook_group.command("list")
@client_command
@renders(lambda hooks: render_rows(COLUMNS, [_row(h) for h in hooks]))
def hook_list(client: FluxClient) -> list[dict]:
    """The namespace's hooks, with their pending and dead deliveries."""
    return client.list_hooks()


@hook_group.command("show")
@click.argument("name")
@client_command
@renders(_render_hook)
def hook_show(client: FluxClient, name: str) -> dict:
    """A hook and its newest deliveries: attempts, status codes, latencies."""
    return {"hook": client.show_hook(name), "deliveries": client.hook_deliveries(name)}


@hook_group.command("delete")
@click.argument("name")
@client_command
def hook_delete(client: FluxClient, name: str) -> Output:
    """Delete hook NAME (its pending deliveries are dropped)."""
    client.delete_hook(name)
    click.echo(f"deleted hook {name}", err=True)
    return Output(None)


@hook_group.command("test")
@click.argument("name")
@client_command
def hook_test(client: FluxClient, name: str) -> Output:
    """Send a hook.test event to NAME and show its first attempt (exit 1 if it failed)."""
    delivery = client.test_hook(name)
    deadline = time.monotonic() + TEST_WAIT
    while not delivery["attempts"] and time.monotonic() < deadline:
        time.sleep(0.2)
        delivery = client.hook_delivery(name, delivery["id"])
    attempts = delivery["attempts"]
    ok = bool(attempts) and attempts[0]["status_code"] is not None and 200 <= attempts[0]["status_code"] < 300
    return Output(delivery, lambda shown: _render_deliveries([shown]), exit_code=0 if ok else 1)


@hook_group.command("redeliver")
@click.argument("name")
@click.argument("delivery_id")
@client_command
@renders(lambda delivery: _render_deliveries([delivery]))
def hook_redeliver(client: FluxClient, name: str, delivery_id: str) -> dict:
    """Send delivery DELIVERY_ID of NAME again, under the same id."""
    return client.redeliver(name, delivery_id)
