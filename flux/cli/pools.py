"""``flux pool ...``: worker pools that scale from the queue's resource shapes
(docs/autoscaling.md): create one from options, or many from a TOML file (``apply``),
list, show (desired, starting, running, idle, the last decision and why), delete."""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path

import click

from flux.cli.core import FiniteRange, UsageProblem, client_command, parse_labels, renders
from flux.cli.output import console, render_record, render_rows, when
from flux.client import FluxClient

COLUMNS = ["name", "provider", "min", "max", "desired", "starting", "running", "idle", "stopping", "provider_error"]
#: Left out where no pool has one, then (stopping first) while the table is wider than the
#: terminal: at 80 columns no word is cut; ``flux pool show`` has both.
OPTIONAL = ("stopping", "provider_error")
PROVIDERS = click.Choice(["local", "kubernetes", "command"])


@click.group("pool")
def pool_group() -> None:
    """Worker pools: templates of workers started when queued work needs them, stopped when idle."""


def pairs(value: str | None, option: str) -> dict[str, str]:
    """``k=v,k=v`` (or repeated) into a mapping."""
    items = tuple(part.strip() for part in (value or "").split(",") if part.strip())
    return parse_labels(items, option)


def _options(
    provider: str,
    worker_args: tuple[str, ...],
    kube_namespace: str | None,
    deployment: str | None,
    pod_template: str | None,
    kubeconfig: str | None,
    kube_context: str | None,
    command: str | None,
    command_timeout: float | None,
) -> dict:
    if provider == "local":
        return {"worker_args": list(worker_args)} if worker_args else {}
    if provider == "kubernetes":
        template = _read_manifest(pod_template) if pod_template else None
        found = {
            "namespace": kube_namespace,
            "deployment": deployment,
            "pod_template": template,
            "kubeconfig": kubeconfig,
            "context": kube_context,
        }
        return {k: v for k, v in found.items() if v is not None}
    if not command:
        raise UsageProblem("--provider command needs --command")
    return {"command": shlex.split(command), **({"timeout": command_timeout} if command_timeout else {})}


def _read_manifest(path: str) -> dict:
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        import yaml  # a Pod manifest is usually YAML

        return yaml.safe_load(text)


def _render_one(pool: dict) -> None:
    render_record({k: v for k, v in pool.items() if k != "workers"})
    if pool["workers"]:
        rows = [{**w, "idle_since": when(w["idle_since"]) if w["idle_since"] else "-"} for w in pool["workers"]]
        render_rows(["name", "state", "requested_at", "idle_since"], rows, title="workers")


@pool_group.command("create")
@click.argument("name")
@click.option("--labels", default=None, help="k=v,k=v: labels its workers advertise (and flux.pool=NAME)")
@click.option("--resources", default=None, help="cpu=8,memory=32Gi,gpu=1,accel=2: what each worker has")
@click.option("--packages", default=None, help="name==version,...: what its workers have installed")
@click.option(
    "--slots", type=click.IntRange(1, 1024), default=4, show_default=True, help="Executions one worker runs at once"
)
@click.option(
    "--min", "minimum", type=click.IntRange(0), default=0, show_default=True, help="Workers kept however idle"
)
@click.option(
    "--max", "maximum", type=click.IntRange(0), default=10, show_default=True, help="Workers it never goes beyond"
)
@click.option(
    "--idle-timeout",
    default="5m",
    show_default=True,
    help="Idle time above --min before a worker is drained and stopped",
)
@click.option(
    "--provider",
    type=PROVIDERS,
    required=True,
    help="local: flux start worker processes here; kubernetes: a Deployment or Pods; command: your executable",
)
@click.option("--worker-arg", "worker_args", multiple=True, help="local: a 'flux start worker' argument, repeatable")
@click.option("--kube-namespace", default=None, help="kubernetes: the namespace [default]")
@click.option("--deployment", default=None, help="kubernetes: scale this Deployment's replicas")
@click.option(
    "--pod-template",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="kubernetes: or create one Pod per worker from this manifest (YAML or JSON)",
)
@click.option("--kubeconfig", default=None, help="kubernetes: a kubeconfig file [in-cluster, else ~/.kube/config]")
@click.option("--kube-context", default=None, help="kubernetes: the kubeconfig's context [its current one]")
@click.option(
    "--command", default=None, help="command: the executable and its arguments; the desired count is appended"
)
@click.option(
    "--command-timeout", type=FiniteRange(min=0, min_open=True), default=None, help="command: seconds it may take [60]"
)
@client_command(namespaced=False)
@renders(_render_one)
def pool_create(
    client: FluxClient,
    name: str,
    labels: str | None,
    resources: str | None,
    packages: str | None,
    slots: int,
    minimum: int,
    maximum: int,
    idle_timeout: str,
    provider: str,
    **options: str | None,
) -> dict:
    """Create a pool NAME of workers started on demand by PROVIDER."""
    return client.create_pool(
        name,
        provider,
        labels=pairs(labels, "--labels"),
        resources=pairs(resources, "--resources"),
        packages=[p.strip() for p in (packages or "").split(",") if p.strip()],
        slots=slots,
        min=minimum,
        max=maximum,
        idle_timeout=idle_timeout,
        options=_options(provider, **options),
    )


@pool_group.command("apply")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@client_command(namespaced=False)
@renders(lambda rows: render_rows(COLUMNS, rows, optional=OPTIONAL))
def pool_apply(client: FluxClient, path: str) -> list[dict]:
    """Create or replace every pool of a TOML file: one [pools.NAME] table each, with the
    API's fields (labels, resources, packages, slots, min, max, idle_timeout, provider, options)."""
    try:
        pools = tomllib.loads(Path(path).read_text()).get("pools", {})
    except tomllib.TOMLDecodeError as exc:
        raise UsageProblem(f"{path}: {exc}") from None
    if not isinstance(pools, dict) or not pools:
        raise UsageProblem(f"{path}: no [pools.NAME] table")
    return [client.apply_pool(name, **{"provider": None, **spec}) for name, spec in pools.items()]


@pool_group.command("list")
@client_command(namespaced=False)
@renders(lambda rows: render_rows(COLUMNS, rows, optional=OPTIONAL))
def pool_list(client: FluxClient) -> list[dict]:
    """Every pool, with its workers by state."""
    return client.list_pools()


@pool_group.command("show")
@click.argument("name")
@client_command(namespaced=False)
@renders(_render_one)
def pool_show(client: FluxClient, name: str) -> dict:
    """A pool: desired, starting, running, idle and stopping workers, the last decision and why."""
    return client.show_pool(name)


@pool_group.command("delete")
@click.argument("name")
@client_command(namespaced=False)
def pool_delete(client: FluxClient, name: str) -> None:
    """Drain and stop its workers (busy ones finish first), then forget it."""
    client.delete_pool(name)
    console.print(f"pool {name} is being deleted: its workers are drained and stopped")
