"""``flux token create/list/revoke/whoami``: client tokens with a role and namespaces
(docs/security.md#roles). ``create`` prints the secret once; no command takes a
secret on its command line, which every user of the machine can see."""

from __future__ import annotations

import time
from datetime import datetime

import click

from flux.cli.core import Output, client_command, renders
from flux.cli.output import render_record, render_rows
from flux.client import FluxClient
from flux.domain.access import ORDER
from flux.domain.durations import InvalidDuration, parse_duration

COLUMNS = ["name", "role", "namespaces", "created_at", "expires_at", "revoked_at"]


class Expiry(click.ParamType):
    """Seconds from now until a token expires: a duration (30d, 12h) or a date and
    time (2027-01-31, 2027-01-31T12:00, local time unless it names its zone)."""

    name = "duration|date"

    def convert(self, value, param, ctx):  # noqa: ANN001
        text = str(value).strip()
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            moment = None
        if moment is not None:
            seconds = moment.timestamp() - time.time()
        elif text.startswith("-"):
            seconds = 0.0
        else:
            try:
                return parse_duration(text, "--expires")
            except InvalidDuration as exc:
                self.fail(f"{exc} (or a date such as 2027-01-31)", param, ctx)
        if seconds <= 0:
            self.fail(f"{text!r} is in the past: give how long the token lasts (30d) or a future date", param, ctx)
        return seconds


@click.group("token")
def token_group() -> None:
    """Client tokens: a role (viewer, developer, operator, admin) in some namespaces or all."""


def _scoped(token: dict) -> dict:
    """The token as people read it: its namespaces as ``all`` or ``ml, ml-eval`` (as whoami
    shows them); a token of several namespaces has none to act in without -n, and says so
    rather than showing a ``default`` it may not use."""
    scope = token.get("namespaces")
    shown = {**token, "namespaces": "all" if scope is None else ", ".join(scope)}
    if "namespace" in token and token["namespace"] is None:
        shown["namespace"] = f"none: pass -n ({shown['namespaces']})"
    return shown


def _created(token: dict) -> None:
    render_record({key: value for key, value in _scoped(token).items() if key != "token"})
    click.echo(token["token"])
    click.echo("This is the only time the token is shown: the server keeps only its hash.", err=True)


@token_group.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice([role.value for role in ORDER]), required=True, help="What the token may do")
@click.option(
    "--namespace", "namespaces", multiple=True, help="A namespace it may act in (repeat for more) [all of them]"
)
@click.option(
    "--expires", type=Expiry(), default=None, help="It expires after this long (30d, 12h) or at this date [never]"
)
@client_command(namespaced=False)
@renders(_created)
def token_create(client: FluxClient, name: str, role: str, namespaces: tuple[str, ...], expires: float | None) -> dict:
    """Create token NAME and print its secret (once: only its hash is kept)."""
    created = client.create_token(name, role, namespaces or None, expires)
    if client.whoami().get("name") == "anonymous":  # this call needed no token: nor does any other
        click.echo(
            "Warning: this server has no --api-token, so every caller without a token is admin and this "
            f"{role} token limits nobody; start it with --api-token (docs/security.md#roles)",
            err=True,
        )
    return created


@token_group.command("list")
@client_command(namespaced=False)
@renders(lambda rows: render_rows(COLUMNS, [_scoped(row) for row in rows]))
def token_list(client: FluxClient) -> list[dict]:
    """Every token, revoked and expired ones too (never a secret)."""
    return client.list_tokens()


@token_group.command("revoke")
@click.argument("name")
@client_command(namespaced=False)
def token_revoke(client: FluxClient, name: str) -> Output:
    """Revoke token NAME: refused from now on, on every replica within seconds."""
    client.revoke_token(name)
    click.echo(f"revoked token {name}", err=True)
    return Output(None)


@token_group.command("whoami")
@client_command(namespaced=False)
@renders(lambda who: render_record(_scoped(who)))
def token_whoami(client: FluxClient) -> dict:
    """The name, role and namespaces of the token this command uses, and the namespace
    it acts in without -n (its only namespace, else default)."""
    return client.whoami()
