"""``flux namespace create/list/show/delete/quota/set`` (docs/namespaces.md). Every other
client command acts in one namespace: ``-n/--namespace``, ``FLUX_NAMESPACE`` or
``[client] namespace``, else the token's only namespace, else ``default``."""

from __future__ import annotations

import click

from flux.cli.core import FiniteRange, Output, UsageProblem, client_command, renders
from flux.cli.output import render_record, render_rows
from flux.client import FluxClient


@click.group("namespace")
def namespace_group() -> None:
    """Namespaces: workflows, executions, schedules, secrets and cache entries each belong to one."""


def _readable(namespace: dict) -> dict:
    """As people read it, not as JSON: its quota and what it holds as ``flux namespace
    quota`` takes and prints them (``cpu=1 memory=4Gi executions=2``), its executions by
    state (``COMPLETED=6 RUNNING=1``), what waits by priority, its past usage to four
    figures and its share of the fleet's in percent, the half-life as a duration."""
    from flux.domain.durations import format_duration
    from flux.domain.quotas import Quota

    shown = dict(namespace)
    for key in ("quota", "held"):
        if shown.get(key):
            shown[key] = Quota.from_json(shown[key]).describe()
    for key, word in (("executions", "{}={}"), ("waiting", "priority {}: {}"), ("usage", "{}={:.4g}")):
        if isinstance(shown.get(key), dict):
            shown[key] = " ".join(word.format(name, value) for name, value in shown[key].items()) or None
    if isinstance(shown.get("usage_share"), (int, float)):
        shown["usage_share"] = f"{100 * shown['usage_share']:.3g}% of the fleet"
    if shown.get("fair_share_half_life"):
        shown["fair_share_half_life"] = format_duration(shown["fair_share_half_life"])
    return shown


def _render_namespace(namespace: dict) -> None:
    render_record(_readable(namespace))


@namespace_group.command("create")
@click.argument("name")
@client_command
def namespace_create(client: FluxClient, name: str) -> dict:
    """Create namespace NAME (empty)."""
    return client.create_namespace(name)


@namespace_group.command("list")
@client_command
@renders(lambda rows: render_rows(["name", "state", "weight", "quota", "created_at"], [_readable(r) for r in rows]))
def namespace_list(client: FluxClient) -> list[dict]:
    """Every namespace and its state."""
    return client.list_namespaces()


@namespace_group.command("show")
@click.argument("name", required=False)
@client_command
@renders(_render_namespace)
def namespace_show(client: FluxClient, name: str | None) -> dict:
    """What namespace NAME (default: the one -n names) holds: workflows, executions by state, schedules, secrets."""
    return client.show_namespace(name)


@namespace_group.command("quota")
@click.argument("name")
@click.argument("limits", nargs=-1)
@click.option("--unset", multiple=True, metavar="KEY", help="Remove KEY from the quota (repeatable)")
@click.option("--replace", is_flag=True, help="Replace the whole quota with LIMITS (else the others are kept)")
@click.option("--clear", is_flag=True, help="Remove the quota")
@client_command
@renders(_render_namespace)
def namespace_quota(
    client: FluxClient, name: str, limits: tuple[str, ...], unset: tuple[str, ...], replace: bool, clear: bool
) -> dict | Output:
    """Change namespace NAME's quota: LIMITS such as cpu=16 memory=64Gi gpu=4
    executions=100 resources.fpga=2 (what its executions may hold at once;
    docs/contention.md) change those keys and keep the others; --unset KEY removes one,
    --replace makes LIMITS the whole quota. Prints the quota before and after. Without
    LIMITS: show it and what is held."""
    from flux.domain.quotas import Quota

    send = _quota_request(limits, unset, replace, clear)
    if send is None:
        return client.show_namespace(name)
    before = Quota.from_json(client.show_namespace(name).get("quota"))
    detail = send(client, name)
    after = Quota.from_json(detail.get("quota"))
    return Output(
        detail, lambda _: click.echo(f"quota of {name}\n  before: {before.describe()}\n  after:  {after.describe()}")
    )


def _quota_request(limits: tuple[str, ...], unset: tuple[str, ...], replace: bool, clear: bool):  # noqa: ANN202
    """The call that makes the change asked for (checked here first: a usage error names
    the key), or None for none (show the quota)."""
    from flux.domain.quotas import Quota, QuotaChange

    if clear and (limits or unset or replace):
        raise UsageProblem("--clear removes the whole quota: give it alone")
    if replace and (unset or not limits):
        raise UsageProblem("--replace makes LIMITS the whole quota: give LIMITS, and no --unset")
    try:
        if clear:
            return lambda client, name: client.update_namespace(name, quota=None)
        if replace:
            quota = Quota.parse(limits)
            return lambda client, name: client.replace_quota(name, quota.keys())
        if limits or unset:
            change = QuotaChange.parse(limits, unset)
            return lambda client, name: client.update_namespace(name, quota=change.keys())
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    return None


@namespace_group.command("set")
@click.argument("name")
@click.option(
    "--weight",
    type=FiniteRange(min=0, min_open=True, max=1e6),
    required=True,
    help="Its fair-share weight against other namespaces of the same priority (default 1)",
)
@client_command
@renders(_render_namespace)
def namespace_set(client: FluxClient, name: str, weight: float) -> dict:
    """Change namespace NAME's fair-share weight (docs/contention.md)."""
    return client.update_namespace(name, weight=weight)


@namespace_group.command("delete")
@click.argument("name")
@click.option("--force", is_flag=True, help="Cancel its unfinished executions (else it is refused while it has any)")
@client_command
def namespace_delete(client: FluxClient, name: str, force: bool) -> Output:
    """Delete namespace NAME with everything in it. With --force its unfinished
    executions are cancelled and it goes once they have ended (TERMINATING meanwhile)."""
    deletion = client.delete_namespace(name, force=force)
    if deletion["state"] == "DELETED":
        click.echo(f"deleted namespace {name}", err=True)
    else:
        click.echo(f"namespace {name} is TERMINATING: {deletion['unfinished']} execution(s) still ending", err=True)
    return Output(deletion)
