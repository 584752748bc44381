"""``flux secret set/list/delete/generate-key``: the server's secret store
(docs/tasks.md#secrets). A value is read from standard input or ``--from-file``,
never from the command line, which every user of the machine can see."""

from __future__ import annotations

import sys

import click

from flux.cli.core import Output, client_command, renders
from flux.cli.output import render_rows
from flux.client import FluxClient


@click.group("secret")
def secret_group() -> None:
    """Secrets tasks receive through secret_requests (encrypted at rest, never listed)."""


@secret_group.command("set")
@click.argument("name")
@click.option(
    "--from-file",
    "from_file",
    type=click.File("r"),
    default=None,
    help="Read the value from this file (else from standard input)",
)
@client_command
def secret_set(client: FluxClient, name: str, from_file) -> dict:  # noqa: ANN001 - a click file
    """Create or replace secret NAME; the value comes from standard input or --from-file.

    One trailing newline is dropped (``echo "$TOKEN" | flux secret set TOKEN``)."""
    if from_file is None and sys.stdin.isatty():
        click.echo(f"value of {name} (then Ctrl-D):", err=True)
    value = (from_file or sys.stdin).read()
    if value.endswith("\n"):
        value = value[:-1]
        if value.endswith("\r"):
            value = value[:-1]
    return client.set_secret(name, value)


@secret_group.command("list")
@client_command
@renders(lambda rows: render_rows(["name", "created_at", "updated_at"], rows))
def secret_list(client: FluxClient) -> list[dict]:
    """Secret names and when they were set (never values)."""
    return client.list_secrets()


@secret_group.command("delete")
@click.argument("name")
@client_command
def secret_delete(client: FluxClient, name: str) -> Output:
    """Delete secret NAME."""
    client.delete_secret(name)
    click.echo(f"deleted secret {name}", err=True)
    return Output(None)


@secret_group.command("generate-key")
def secret_generate_key() -> None:
    """Print a new Fernet key for FLUX_SECRETS_KEY or --secrets-key-file (keep it safe:
    without it the stored secrets cannot be read)."""
    from cryptography.fernet import Fernet

    click.echo(Fernet.generate_key().decode())
