"""The ``flux`` command line: start processes, register and run workflows, inspect state."""

from __future__ import annotations

import functools
import json
import logging
import sys
from datetime import datetime
from typing import Any, Callable

import click
from rich.console import Console
from rich.table import Table

from flux.client import DEFAULT_SERVER_URL, FluxClient, FluxClientError
from flux.domain.resource_request import InvalidResourceRequest, parse_custom_resources, parse_quantity
from flux.runners import RUNNER_NAMES
from flux.server.settings import (
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_JSON_DEPTH,
    ServerSettings,
    default_home,
    ensure_bootstrap_token,
    prepare_home,
    read_token_file,
    redact_url,
    resolve_api_token,
)

console = Console()


class QuantityType(click.ParamType):
    """Bytes from an int or a Kubernetes-style quantity (512Mi, 2Gi, 1G)."""

    name = "quantity"

    def __init__(self, allow_zero: bool = False):
        self.allow_zero = allow_zero  # for limits where 0 means "off"

    def convert(self, value, param, ctx):  # noqa: ANN001
        if isinstance(value, int):
            return value
        if self.allow_zero and value.strip() == "0":
            return 0
        try:
            return parse_quantity(value, f"--{param.name.replace('_', '-')}")
        except InvalidResourceRequest as exc:
            self.fail(str(exc), param, ctx)


QUANTITY = QuantityType()


def _when(value: float | None) -> str:
    return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _labels(pairs: tuple[str, ...], option: str = "--label") -> dict[str, str]:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        result[key] = value
    return result


def _custom_resources(pairs: tuple[str, ...]) -> dict[str, float]:
    try:
        amounts = {name: float(amount) for name, amount in _labels(pairs, "--resource").items()}
        return dict(parse_custom_resources(amounts, "--resource"))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--resource") from None


def client_command(fn: Callable) -> Callable:
    """Adds --server-url and --format, and turns client errors into one-line CLI errors."""

    @click.option("--server-url", envvar="FLUX_SERVER_URL", default=DEFAULT_SERVER_URL, show_default=True)
    @click.option("--api-token-file", envvar="FLUX_API_TOKEN_FILE", type=click.Path(dir_okay=False), default=None,
                  help="File holding the server's API token [else FLUX_API_TOKEN]")
    @click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
    @functools.wraps(fn)
    def wrapper(server_url: str, api_token_file: str | None, fmt: str, **kwargs: Any) -> None:
        try:
            api_token = read_token_file(api_token_file) if api_token_file else None
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"cannot read the API token: {exc}") from None
        try:
            with FluxClient(server_url, api_token=api_token) as client:
                result = fn(client, **kwargs)
        except FluxClientError as exc:
            raise click.ClickException(str(exc)) from None
        if fmt == "json":
            click.echo(json.dumps(result, indent=2, default=str))
        else:
            render = getattr(fn, "render", None)
            (render or _render_record)(result)

    return wrapper


def renders(render: Callable[[Any], None]) -> Callable:
    def attach(fn: Callable) -> Callable:
        fn.render = render
        return fn

    return attach


def _render_rows(columns: list[str], rows: list[dict], title: str | None = None) -> None:
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*(_when(row[c]) if c.endswith("_at") else _cell(row.get(c)) for c in columns))
    console.print(table)


def _render_record(record: dict) -> None:
    table = Table("field", "value", show_header=False)
    for key, value in record.items():
        if key == "source":
            continue
        table.add_row(key, _when(value) if key.endswith("_at") and value else _cell(value))
    console.print(table)


@click.group()
@click.version_option(package_name="flux-engine")
@click.option("--config", envvar="FLUX_CONFIG", type=click.Path(dir_okay=False), default=None,
              help="TOML settings for 'start server' / 'start worker' [./flux.toml if present]")
@click.pass_context
def main(ctx: click.Context, config: str | None) -> None:
    """Flux: durable Python workflows on a fleet of resource-aware workers."""
    from flux.config import load_default_map

    ctx.default_map = load_default_map(config, {"server": start_server, "worker": start_worker})


def _token_from_file(path: str, what: str) -> str:
    try:
        return read_token_file(path)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot read the {what} token: {exc}") from None


# --- start -------------------------------------------------------------------------------


@main.group()
def start() -> None:
    """Start a server or a worker process."""


@start.command("server")
@click.option("--home", envvar="FLUX_HOME", type=click.Path(), default=None, help="Folder for the token and SQLite database [~/.flux]")
@click.option("--host", envvar="FLUX_HOST", default="127.0.0.1", show_default=True)
@click.option("--port", envvar="FLUX_PORT", type=int, default=8000, show_default=True)
@click.option("--database-url", envvar="FLUX_DATABASE_URL", default=None, help="SQLAlchemy URL [sqlite:///HOME/flux.db]")
@click.option("--eviction-grace-period", envvar="FLUX_EVICTION_GRACE_PERIOD", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              help="Seconds without heartbeat before a worker is evicted and its work requeued")
@click.option("--bootstrap-token", envvar="FLUX_BOOTSTRAP_TOKEN", default=None,
              help="Token workers register with; give every replica the same one [HOME/bootstrap-token]; "
                   "prefer the environment or --bootstrap-token-file: the command line is visible to every user")
@click.option("--bootstrap-token-file", envvar="FLUX_BOOTSTRAP_TOKEN_FILE", type=click.Path(exists=True, dir_okay=False),
              default=None, help="Read the bootstrap token from this file (a mounted secret, say)")
@click.option("--api-token", envvar="FLUX_API_TOKEN", default=None,
              help="Require this bearer token on client calls (registering workflows runs code on every worker); "
                   "prefer the environment or --api-token-file: the command line is visible to every user")
@click.option("--api-token-file", envvar="FLUX_API_TOKEN_FILE", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Read the API token from this file [HOME/api-token, generated, when --host is not loopback]")
@click.option("--max-body-size", envvar="FLUX_MAX_BODY_SIZE", type=QuantityType(allow_zero=True), default=DEFAULT_MAX_BODY_SIZE, show_default=True,
              help="Largest request body in bytes or a quantity such as 64Mi (413 above it); 0 = no limit")
@click.option("--max-json-depth", envvar="FLUX_MAX_JSON_DEPTH", type=click.IntRange(1), default=DEFAULT_MAX_JSON_DEPTH,
              show_default=True, help="Deepest nesting of a JSON request body (422 deeper)")
@click.option("--processes", envvar="FLUX_SERVER_PROCESSES", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes on this host, each a replica (PostgreSQL only)")
@click.option("--lease-interval", envvar="FLUX_LEASE_INTERVAL", type=click.FloatRange(min=0.1), default=None,
              help="Seconds between flushes of worker liveness to the database [10 on PostgreSQL, 300 on SQLite]")
@click.option("--shed-after", envvar="FLUX_SHED_AFTER", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Answer new work 503 + Retry-After once database work has queued this many seconds (0: never)")
@click.option("--max-attempts", "default_max_attempts", envvar="FLUX_MAX_ATTEMPTS", type=click.IntRange(1, 1000), default=3,
              show_default=True, help="Attempts an execution may crash in before it fails, for workflows that set none")
@click.option("--attempt-backoff", envvar="FLUX_ATTEMPT_BACKOFF", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Seconds before the attempt after a crash, doubled after each further crash (at most 60)")
def start_server(home: str | None, host: str, port: int, database_url: str | None, eviction_grace_period: float,
                 bootstrap_token: str | None, bootstrap_token_file: str | None, api_token: str | None,
                 api_token_file: str | None, max_body_size: int,
                 max_json_depth: int, processes: int, lease_interval: float | None, shed_after: float,
                 default_max_attempts: int, attempt_backoff: float) -> None:
    """Run the Flux server (API, dispatcher, persistence)."""
    import os

    from flux.server.database import is_sqlite, normalise_url
    from flux.server.serve import serve, serve_processes

    os.umask(0o077)  # whatever the server writes (SQLite's -wal/-shm files, tokens) is the owner's alone
    settings = ServerSettings(
        home=home or default_home(), database_url=database_url, host=host, port=port,
        eviction_grace_period=eviction_grace_period, bootstrap_token=bootstrap_token, api_token=api_token,
        api_token_file=api_token_file, max_body_size=max_body_size, max_json_depth=max_json_depth,
        lease_interval=lease_interval, shed_after=shed_after, processes=processes,
        default_max_attempts=default_max_attempts, attempt_backoff=attempt_backoff,
    )
    if bootstrap_token_file:
        settings.bootstrap_token = _token_from_file(bootstrap_token_file, "bootstrap")
    if processes > 1 and is_sqlite(normalise_url(settings.database_url)):
        raise click.BadParameter("several processes need PostgreSQL (SQLite has one writer); use --processes 1",
                                 param_hint="--processes")
    try:
        settings.api_token, token_note = resolve_api_token(settings)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot read the API token: {exc}") from None
    click.echo(f"Flux server on http://{host}:{port}  database: {redact_url(settings.database_url)}  home: {settings.home}"
               + (f"  processes: {processes}" if processes > 1 else ""))
    if token_note:
        click.echo(token_note)
    if processes == 1:
        from flux.server.app import create_app

        serve(create_app(settings), host, port)
    else:
        serve_processes(settings)


@start.command("worker")
@click.argument("name")
@click.option("--server-url", envvar="FLUX_SERVER_URL", default=DEFAULT_SERVER_URL, show_default=True,
              help="Server URL; several comma-separated replicas fail over in turn")
@click.option("--bootstrap-token", envvar="FLUX_BOOTSTRAP_TOKEN", default=None,
              help="Token from 'flux server bootstrap-token' (read from --home when omitted); "
                   "prefer the environment or --bootstrap-token-file")
@click.option("--bootstrap-token-file", envvar="FLUX_BOOTSTRAP_TOKEN_FILE", type=click.Path(exists=True, dir_okay=False),
              default=None, help="Read the bootstrap token from this file (a mounted secret, say)")
@click.option("--home", envvar="FLUX_HOME", type=click.Path(), default=None)
@click.option("--label", "labels", envvar="FLUX_LABELS", multiple=True,
              help="KEY=VALUE, repeatable (FLUX_LABELS: space-separated); matched by workflow affinity")
@click.option("--max-concurrent-executions", envvar="FLUX_MAX_CONCURRENT_EXECUTIONS", type=click.IntRange(1), default=4, show_default=True)
@click.option("--heartbeat-interval", envvar="FLUX_HEARTBEAT_INTERVAL", type=click.FloatRange(min=0.01), default=5.0, show_default=True)
@click.option("--runner", envvar="FLUX_RUNNER", type=click.Choice(RUNNER_NAMES), default="subprocess", show_default=True)
@click.option("--gpu-source", envvar="FLUX_GPU_SOURCE", default="auto", show_default=True,
              help="auto (NVML, then GPUtil), nvml, gputil, none, or nvml:module:attribute (an NVML-compatible binding)")
@click.option("--metrics-provider", envvar="FLUX_METRICS_PROVIDER", default=None,
              help="module:function returning live metrics (dict of floats) for routing policies")
@click.option("--allocation", envvar="FLUX_ALLOCATION", type=click.Choice(["sample", "reserve"]), default="sample", show_default=True,
              help="Match against sampled availability (spec) or capacity minus what running executions were allotted")
@click.option("--enforce-requests/--no-enforce-requests", envvar="FLUX_ENFORCE_REQUESTS", default=False, show_default=True,
              help="Derive CPU pinning and memory ceilings from each execution's request")
@click.option("--subprocess-memory-limit", envvar="FLUX_SUBPROCESS_MEMORY_LIMIT", type=QUANTITY, default=None,
              help="Address-space ceiling for every subprocess child (e.g. 2Gi)")
@click.option("--max-executions-per-child", envvar="FLUX_MAX_EXECUTIONS_PER_CHILD", type=click.IntRange(1), default=100,
              show_default=True, help="Executions a subprocess child serves in turn; 1 = a fresh process for each")
@click.option("--docker-image", envvar="FLUX_DOCKER_IMAGE", default="python:3.11-slim", show_default=True)
@click.option("--docker-memory", envvar="FLUX_DOCKER_MEMORY", type=QUANTITY, default=None, help="--memory for every container")
@click.option("--docker-cpus", envvar="FLUX_DOCKER_CPUS", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--docker-arg", "docker_args", envvar="FLUX_DOCKER_ARGS", multiple=True, help="Extra 'docker run' argument, repeatable")
@click.option("--resource", "custom_resources", envvar="FLUX_RESOURCES", multiple=True,
              help="NAME=AMOUNT custom resource to advertise (e.g. fpga=2), repeatable; requested with resources={...}")
@click.option("--drain-timeout", envvar="FLUX_DRAIN_TIMEOUT", type=click.FloatRange(min=0), default=60.0, show_default=True,
              help="On SIGTERM/SIGINT, seconds running executions may finish before they are handed back to resume elsewhere")
def start_worker(name: str, server_url: str, bootstrap_token: str | None, bootstrap_token_file: str | None,
                 home: str | None, labels: tuple[str, ...],
                 max_concurrent_executions: int, heartbeat_interval: float, runner: str, gpu_source: str,
                 metrics_provider: str | None, allocation: str, enforce_requests: bool,
                 subprocess_memory_limit: int | None, max_executions_per_child: int, docker_image: str, docker_memory: int | None,
                 docker_cpus: float | None, docker_args: tuple[str, ...], custom_resources: tuple[str, ...],
                 drain_timeout: float) -> None:
    """Run a worker named NAME that executes workflows dispatched by the server."""
    import asyncio

    from flux.worker import Worker, WorkerConfig

    token = _token_from_file(bootstrap_token_file, "bootstrap") if bootstrap_token_file else bootstrap_token
    if not token:
        path = ServerSettings(home=home or default_home()).bootstrap_token_path
        if not path.exists():
            raise click.ClickException(f"no --bootstrap-token given and {path} does not exist")
        token = path.read_text().strip()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    config = WorkerConfig(
        name=name, server_url=server_url, bootstrap_token=token, labels=_labels(labels),
        max_concurrent_executions=max_concurrent_executions, heartbeat_interval=heartbeat_interval,
        runner=runner, gpu_source=gpu_source, metrics_provider=metrics_provider, allocation=allocation,
        enforce_requests=enforce_requests, subprocess_memory_limit=subprocess_memory_limit,
        max_executions_per_child=max_executions_per_child,
        docker_image=docker_image, docker_memory=docker_memory, docker_cpus=docker_cpus, docker_args=docker_args,
        custom_resources=_custom_resources(custom_resources), drain_timeout=drain_timeout,
        home=str(ServerSettings(home=home or default_home()).home),
    )
    from flux.worker_identity import NameTaken

    try:
        asyncio.run(Worker(config).run())
    except NameTaken as exc:
        raise click.ClickException(str(exc)) from None


# --- server ------------------------------------------------------------------------------


@main.group()
def server() -> None:
    """Server administration."""


@server.command("migrate")
@click.option("--home", envvar="FLUX_HOME", type=click.Path(), default=None)
@click.option("--database-url", envvar="FLUX_DATABASE_URL", default=None, help="SQLAlchemy URL [sqlite:///HOME/flux.db]")
def server_migrate(home: str | None, database_url: str | None) -> None:
    """Bring the database schema to the newest version (the server also does this on start)."""
    from flux.server.database import migrate

    settings = ServerSettings(home=home or default_home(), database_url=database_url)
    prepare_home(settings)
    migrate(settings.database_url)
    click.echo(f"database at the newest schema: {redact_url(settings.database_url)}")


@server.command("bootstrap-token")
@click.option("--home", envvar="FLUX_HOME", type=click.Path(), default=None)
def bootstrap_token(home: str | None) -> None:
    """Print the token workers present to register (created on first use)."""
    click.echo(ensure_bootstrap_token(ServerSettings(home=home or default_home()).home))


# --- workflows ---------------------------------------------------------------------------


@main.group("workflow")
def workflow_group() -> None:
    """Register, inspect and run workflows."""


def _render_workflows(rows: list[dict]) -> None:
    _render_rows(["name", "version", "filename", "requests", "affinity", "created_at"], rows)


@workflow_group.command("register")
@click.argument("file", type=click.Path(dir_okay=False))
@client_command
@renders(_render_workflows)
def workflow_register(client: FluxClient, file: str) -> list[dict]:
    """Upload FILE and register every @workflow it defines."""
    registered = client.register_file(file)
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


@workflow_group.command("show")
@click.argument("name")
@click.option("--version", type=click.IntRange(1), default=None)
@client_command
def workflow_show(client: FluxClient, name: str, version: int | None) -> dict:
    """Show a workflow, its resource requests and affinity."""
    return client.show_workflow(name, version)


@workflow_group.command("run")
@click.argument("name")
@click.argument("input", default="null")
@click.option("--wait/--no-wait", default=False, help="Wait until the execution ends")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait with --wait")
@client_command
def workflow_run(client: FluxClient, name: str, input: str, wait: bool, timeout: float) -> dict:
    """Start workflow NAME with INPUT (JSON)."""
    try:
        value = json.loads(input)
    except json.JSONDecodeError as exc:
        raise FluxClientError(f"INPUT is not valid JSON ({exc.msg} at position {exc.pos}): {input!r}") from None
    return client.run(name, value, wait=timeout if wait else None)


# --- executions --------------------------------------------------------------------------


@main.group("execution")
def execution_group() -> None:
    """Inspect and cancel executions."""


@execution_group.command("list")
@click.option("--state", default=None)
@click.option("--workflow", default=None)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@client_command
@renders(lambda rows: _render_rows(["id", "workflow_name", "state", "worker_name", "scheduled_at"], rows))
def execution_list(client: FluxClient, state: str | None, workflow: str | None, limit: int) -> list[dict]:
    """List recent executions."""
    return client.list_executions(state, workflow, limit)


@execution_group.command("show")
@click.argument("execution_id")
@client_command
def execution_show(client: FluxClient, execution_id: str) -> dict:
    """Show an execution's state, output and placement."""
    return client.execution(execution_id)


@execution_group.command("events")
@click.argument("execution_id")
@client_command
@renders(lambda rows: _render_rows(["seq", "type", "name", "task_id", "value", "worker_name"], rows))
def execution_events(client: FluxClient, execution_id: str) -> list[dict]:
    """Show an execution's event log."""
    return client.events(execution_id)


def _render_placement(info: dict) -> None:
    console.print(f"[bold]{info['summary']}[/]")
    if info.get("unschedulable"):
        console.print(f"[red]unschedulable:[/] {info['unschedulable']}")
    _render_rows(["name", "state", "available", "reason"], info["workers"])
    attempts = info.get("attempts") or []
    if attempts:
        console.print(
            f"[bold]attempts:[/] {len(attempts)} used; {info['crashes']} of {info['max_attempts']} allowed crashes"
        )
        for a in attempts:
            how = f"{a['end']}: {a['cause']}" if a.get("end") else "running"
            console.print(f"  attempt {a['attempt']} on {a['worker']}: {how}" + (" [counted]" if a.get("counted") else ""))


@execution_group.command("explain")
@click.argument("execution_id")
@client_command
@renders(_render_placement)
def execution_explain(client: FluxClient, execution_id: str) -> dict:
    """Why is it pending? Each worker's verdict, or why the chosen worker won."""
    return client.placement(execution_id)


@execution_group.command("cancel")
@click.argument("execution_id")
@client_command
def execution_cancel(client: FluxClient, execution_id: str) -> dict:
    """Cancel an execution (at once if queued; its worker stops it if running)."""
    return client.cancel(execution_id)


# --- workers -----------------------------------------------------------------------------


@main.group("worker")
def worker_group() -> None:
    """Inspect workers."""


@worker_group.command("list")
@client_command
@renders(lambda rows: _render_rows(["name", "state", "running", "max_concurrent_executions", "labels", "last_heartbeat_at"], rows))
def worker_list(client: FluxClient) -> list[dict]:
    """List registered workers."""
    return client.list_workers()


@worker_group.command("show")
@click.argument("name")
@client_command
def worker_show(client: FluxClient, name: str) -> dict:
    """Show a worker's resources, GPUs, runtime and labels."""
    return client.show_worker(name)


@worker_group.command("drain")
@click.argument("name")
@click.option("--wait", is_flag=True, help="Return once the worker runs nothing (DRAINED)")
@click.option("--timeout", type=click.FloatRange(min=0), default=3600.0, show_default=True, help="Seconds to wait with --wait")
@client_command
def worker_drain(client: FluxClient, name: str, wait: bool, timeout: float) -> dict:
    """Stop giving NAME new work; it finishes what it runs, then shows DRAINED."""
    worker = client.drain_worker(name, wait=timeout if wait else None)
    if wait:
        click.echo(f"worker {name} is {worker['state']}: it runs nothing", err=True)
    return worker


@worker_group.command("undrain")
@click.argument("name")
@client_command
def worker_undrain(client: FluxClient, name: str) -> dict:
    """Let a drained worker take work again."""
    return client.undrain_worker(name)


@main.command()
@click.option("--keep-home", is_flag=True, help="Keep the demo's database folder")
def demo(keep_home: bool) -> None:
    """Start a server on SQLite and a local worker, run an example, explain what happened."""
    from flux.demo import run_demo

    try:
        run_demo(console, keep_home=keep_home)
    except FluxClientError as exc:
        raise click.ClickException(str(exc)) from None


if __name__ == "__main__":
    sys.exit(main())
