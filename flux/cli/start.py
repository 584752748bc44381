"""``flux start server|worker``, ``flux server ...`` and ``flux demo``: the processes."""

from __future__ import annotations

import contextlib
import errno
import socket
from pathlib import Path
from typing import Callable, Iterator

import click

from flux.cli.core import (
    DURATION,
    DURATION_OR_ZERO,
    QUANTITY,
    AddressInUse,
    FiniteRange,
    QuantityType,
    parse_labels,
    parse_resources,
    parse_worker_namespaces,
    token_from_file,
)
from flux.cli.fleet import bootstrap_token_for_admin, bootstrap_token_for_worker, ready_lines, run_file
from flux.cli.output import console
from flux.client import DEFAULT_SERVER_URL
from flux.domain.gang import DEFAULT_MAX_SIZE as DEFAULT_MAX_GANG_SIZE
from flux.domain.workers import DEFAULT_MAX_HEARTBEATS_PER_SECOND, AllocationMode
from flux.logformat import FORMATS, configure_logging
from flux.server import runfiles
from flux.server.runfiles import RunFile
from flux.server.settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_BUNDLE_SIZE,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_MAX_JSON_DEPTH,
    ServerSettings,
    default_home,
    prepare_home,
    redact_url,
    resolve_api_token,
)
from flux.worker.cgroups import DEFAULT_ROOT as DEFAULT_CGROUP_ROOT
from flux.worker.runners import RUNNER_NAMES

HOME_HELP = "Folder for the bootstrap token, the API token and the SQLite database"

log_format_option = click.option(
    "--log-format",
    envvar="FLUX_LOG_FORMAT",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="This process's own log lines: text, or JSON lines with execution_id, worker, request_id (for Loki, ELK)",
)


bootstrap_token_file_option = click.option(
    "--bootstrap-token-file",
    envvar="FLUX_BOOTSTRAP_TOKEN_FILE",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Read the bootstrap token from this file (a mounted secret, say)",
)


def home_option(help: str = HOME_HELP):  # noqa: A002, ANN201
    return click.option(
        "--home", envvar="FLUX_HOME", type=click.Path(file_okay=False), default=None, help=f"{help} [~/.flux]"
    )


@click.group()
def start() -> None:
    """Start a server or a worker process."""


@start.command("server")
@home_option()
@click.option(
    "--host",
    envvar="FLUX_HOST",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (beyond loopback the API requires a token)",
)
@click.option("--port", envvar="FLUX_PORT", type=int, default=8000, show_default=True, help="Port to listen on")
@click.option(
    "--database-url", envvar="FLUX_DATABASE_URL", default=None, help="SQLAlchemy URL [sqlite:///HOME/flux.db]"
)
@click.option(
    "--eviction-grace-period",
    envvar="FLUX_EVICTION_GRACE_PERIOD",
    type=FiniteRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds without heartbeat before a worker is evicted and its work requeued",
)
@click.option(
    "--bootstrap-token",
    envvar="FLUX_BOOTSTRAP_TOKEN",
    default=None,
    help="Token workers register with; give every replica the same one [HOME/bootstrap-token]; "
    "prefer the environment or --bootstrap-token-file: the command line is visible to every user",
)
@bootstrap_token_file_option
@click.option(
    "--api-token",
    envvar="FLUX_API_TOKEN",
    default=None,
    help="Require this bearer token on client calls (registering workflows runs code on every worker); "
    "prefer the environment or --api-token-file: the command line is visible to every user",
)
@click.option(
    "--api-token-file",
    envvar="FLUX_API_TOKEN_FILE",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Read the API token from this file [HOME/api-token, generated, when --host is not loopback]",
)
@click.option(
    "--max-body-size",
    envvar="FLUX_MAX_BODY_SIZE",
    type=QuantityType(allow_zero=True),
    default=DEFAULT_MAX_BODY_SIZE,
    show_default=True,
    help="Largest request body in bytes or a quantity such as 64Mi (413 above it); 0 = no limit",
)
@click.option(
    "--max-header-size",
    envvar="FLUX_MAX_HEADER_SIZE",
    type=QuantityType(),
    default=DEFAULT_MAX_HEADER_SIZE,
    show_default=True,
    help="Largest request line and headers in bytes or a quantity such as 64Ki (431 above it)",
)
@click.option(
    "--header-timeout",
    envvar="FLUX_HEADER_TIMEOUT",
    type=FiniteRange(min=0.1),
    default=DEFAULT_HEADER_TIMEOUT,
    show_default=True,
    help="Seconds a connection has to send a request's headers (408 and closed after)",
)
@click.option(
    "--body-timeout",
    envvar="FLUX_BODY_TIMEOUT",
    type=FiniteRange(min=0.1),
    default=DEFAULT_BODY_TIMEOUT,
    show_default=True,
    help="Seconds a request has to send its body once its headers are in (408 and closed after)",
)
@click.option(
    "--max-connections",
    envvar="FLUX_MAX_CONNECTIONS",
    type=click.IntRange(1),
    default=DEFAULT_MAX_CONNECTIONS,
    show_default=True,
    help="Connections open at once per server process (503 past it; lowered to fit its file descriptors)",
)
@click.option(
    "--max-payload-size",
    envvar="FLUX_MAX_PAYLOAD_SIZE",
    type=QUANTITY,
    default=None,
    help="Largest input, task result or workflow output (JSON bytes or a quantity such as 32Mi) "
    "[32Mi, or less when --max-body-size is lower]",
)
@click.option(
    "--retention",
    envvar="FLUX_RETENTION",
    type=DURATION,
    default=None,
    help="Delete finished executions (events and logs too) this long after they finished, e.g. 30d [keep]",
)
@click.option(
    "--max-json-depth",
    envvar="FLUX_MAX_JSON_DEPTH",
    type=click.IntRange(1),
    default=DEFAULT_MAX_JSON_DEPTH,
    show_default=True,
    help="Deepest nesting of a JSON request body (422 deeper)",
)
@click.option(
    "--processes",
    envvar="FLUX_SERVER_PROCESSES",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes on this host, each a replica (PostgreSQL only)",
)
@click.option(
    "--lease-interval",
    envvar="FLUX_LEASE_INTERVAL",
    type=FiniteRange(min=0.1),
    default=None,
    help="Seconds between flushes of worker liveness to the database [5 on PostgreSQL (at most a sixth of "
    "the grace period; more than a third is refused), 300 on SQLite]",
)
@click.option(
    "--max-heartbeats-per-second",
    envvar="FLUX_MAX_HEARTBEATS_PER_SECOND",
    type=FiniteRange(min=0),
    default=DEFAULT_MAX_HEARTBEATS_PER_SECOND,
    show_default=True,
    help="Heartbeats a second the whole fleet sends at most: past it workers are told to beat less often, "
    "and a silent one is found later in proportion (0: no limit; docs/fleet.md#heartbeat-pacing)",
)
@click.option(
    "--shed-after",
    envvar="FLUX_SHED_AFTER",
    type=FiniteRange(min=0),
    default=5.0,
    show_default=True,
    help="Answer new work 503 + Retry-After once database work has queued this many seconds (0: never)",
)
@click.option(
    "--max-attempts",
    "default_max_attempts",
    envvar="FLUX_MAX_ATTEMPTS",
    type=click.IntRange(1, 1000),
    default=3,
    show_default=True,
    help="Attempts an execution may crash in before it fails, for workflows that set none",
)
@click.option(
    "--attempt-backoff",
    envvar="FLUX_ATTEMPT_BACKOFF",
    type=FiniteRange(min=0),
    default=1.0,
    show_default=True,
    help="Seconds before the attempt after a crash, doubled after each further crash (at most 60)",
)
@click.option(
    "--max-bundle-size",
    envvar="FLUX_MAX_BUNDLE_SIZE",
    type=QuantityType(),
    default=DEFAULT_MAX_BUNDLE_SIZE,
    show_default=True,
    help="Largest workflow bundle, zipped, in bytes or a quantity such as 32Mi (413 above it)",
)
@click.option(
    "--bundle-dir",
    envvar="FLUX_BUNDLE_DIR",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for bundles over 1 MiB (smaller ones stay in the database); replicas share it [HOME/bundles]",
)
@click.option(
    "--secrets-key-file",
    envvar="FLUX_SECRETS_KEY_FILE",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="File with the Fernet key(s) that encrypt secrets at rest (FLUX_SECRETS_KEY wins; 'flux secret generate-key')",
)
@click.option(
    "--priority-class",
    "priority_classes",
    envvar="FLUX_PRIORITY_CLASSES",
    multiple=True,
    metavar="NAME=VALUE[:never]",
    help="Add or redefine a priority class (repeatable; defaults critical=1000 high=100 default=0 low=-100 "
    "batch=-1000); ':never' makes its work wait rather than preempt (docs/contention.md)",
)
@click.option(
    "--preemption-grace",
    envvar="FLUX_PREEMPTION_GRACE",
    type=FiniteRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds a preempted attempt has before it ends (the task sees current_task().preempting)",
)
@click.option(
    "--preemption-cooldown",
    envvar="FLUX_PREEMPTION_COOLDOWN",
    type=DURATION_OR_ZERO,
    default="5m",
    show_default=True,
    help="An execution preempted this recently is preempted again only when nothing else makes room (0: off)",
)
@click.option(
    "--fair-share-half-life",
    envvar="FLUX_FAIR_SHARE_HALF_LIFE",
    type=DURATION_OR_ZERO,
    default="1h",
    show_default=True,
    help="Half-life of each namespace's past usage in fair share (0: only what it holds now; docs/contention.md)",
)
@click.option(
    "--hooks-allow-private/--no-hooks-allow-private",
    envvar="FLUX_HOOKS_ALLOW_PRIVATE",
    default=False,
    show_default=True,
    help="Let webhooks reach loopback, link-local and private addresses (the server's own network)",
)
@click.option(
    "--hooks-max-age",
    envvar="FLUX_HOOKS_MAX_AGE",
    type=DURATION,
    default="24h",
    show_default=True,
    help="How long a webhook delivery is retried before it is dead",
)
@click.option(
    "--hooks-backoff",
    envvar="FLUX_HOOKS_BACKOFF",
    type=FiniteRange(min=0.01),
    default=10.0,
    show_default=True,
    help="Seconds before a webhook delivery's first retry, doubled per failure (at most 1 h), with jitter",
)
@click.option(
    "--hooks-timeout",
    envvar="FLUX_HOOKS_TIMEOUT",
    type=FiniteRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds one webhook POST may take in all",
)
@click.option(
    "--hooks-unschedulable-after",
    envvar="FLUX_HOOKS_UNSCHEDULABLE_AFTER",
    type=DURATION_OR_ZERO,
    default="5m",
    show_default=True,
    help="How long an execution stays unschedulable before execution.unschedulable is sent (once per wait); 0: at once",
)
@click.option(
    "--autoscale/--no-autoscale",
    envvar="FLUX_AUTOSCALE",
    default=True,
    show_default=True,
    help="Start and stop the workers of worker pools (docs/autoscaling.md); off: pools are kept but not acted on",
)
@click.option(
    "--max-gang-size",
    envvar="FLUX_MAX_GANG_SIZE",
    type=click.IntRange(min=2),
    default=DEFAULT_MAX_GANG_SIZE,
    show_default=True,
    help="The largest gang a workflow may declare or a run ask for (docs/gangs.md); more is a 422 naming gang.size",
)
@log_format_option
def start_server(
    home: str | None,
    host: str,
    port: int,
    database_url: str | None,
    eviction_grace_period: float,
    bootstrap_token: str | None,
    bootstrap_token_file: str | None,
    api_token: str | None,
    api_token_file: str | None,
    max_body_size: int,
    max_header_size: int,
    header_timeout: float,
    body_timeout: float,
    max_connections: int,
    max_payload_size: int | None,
    retention: float | None,
    max_json_depth: int,
    processes: int,
    lease_interval: float | None,
    max_heartbeats_per_second: float,
    shed_after: float,
    default_max_attempts: int,
    attempt_backoff: float,
    max_bundle_size: int,
    bundle_dir: str | None,
    secrets_key_file: str | None,
    priority_classes: tuple[str, ...],
    preemption_grace: float,
    preemption_cooldown: float,
    fair_share_half_life: float,
    hooks_allow_private: bool,
    hooks_max_age: float,
    hooks_backoff: float,
    hooks_timeout: float,
    hooks_unschedulable_after: float,
    autoscale: bool,
    max_gang_size: int,
    log_format: str,
) -> None:
    """Run the Flux server (API, dispatcher, persistence)."""
    import os

    from flux.server.database import is_sqlite, normalise_url
    from flux.server.serve import serve, serve_processes

    os.umask(0o077)  # whatever the server writes (SQLite's -wal/-shm files, tokens) is the owner's alone
    configure_logging(log_format)
    os.environ["FLUX_LOG_FORMAT"] = log_format  # for the processes of --processes N
    try:
        settings = ServerSettings(
            home=home or default_home(),
            database_url=database_url,
            host=host,
            port=port,
            eviction_grace_period=eviction_grace_period,
            bootstrap_token=bootstrap_token,
            api_token=api_token,
            api_token_file=api_token_file,
            max_body_size=max_body_size,
            max_json_depth=max_json_depth,
            max_header_size=max_header_size,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            max_connections=max_connections,
            max_payload_size=max_payload_size,
            retention=retention,
            lease_interval=lease_interval,
            max_heartbeats_per_second=max_heartbeats_per_second,
            shed_after=shed_after,
            processes=processes,
            default_max_attempts=default_max_attempts,
            attempt_backoff=attempt_backoff,
            max_bundle_size=max_bundle_size,
            bundle_dir=bundle_dir,
            secrets_key_file=secrets_key_file,
            priority_classes=list(priority_classes),
            preemption_grace=preemption_grace,
            preemption_cooldown=preemption_cooldown,
            fair_share_half_life=fair_share_half_life,
            hooks_allow_private=hooks_allow_private,
            hooks_max_age=hooks_max_age,
            hooks_backoff=hooks_backoff,
            hooks_timeout=hooks_timeout,
            hooks_unschedulable_after=hooks_unschedulable_after,
            autoscale=autoscale,
            max_gang_size=max_gang_size,
        )
    except ValueError as exc:
        hint = "--priority-class" if "priority class" in str(exc) else "--max-payload-size"
        raise click.BadParameter(str(exc), param_hint=hint) from None
    if bootstrap_token_file:
        settings.bootstrap_token = token_from_file(bootstrap_token_file, "bootstrap")
    on_sqlite = is_sqlite(normalise_url(settings.database_url))
    if processes > 1 and on_sqlite:
        raise click.BadParameter(
            "several processes need PostgreSQL (SQLite has one writer); use --processes 1", param_hint="--processes"
        )
    if lease_interval is not None and not on_sqlite and lease_interval > eviction_grace_period / 3:
        raise click.BadParameter(
            f"{lease_interval:g} s is more than a third of the eviction grace period ({eviction_grace_period:g} s): "
            "another replica could evict a live worker whose lease had not been flushed yet",
            param_hint="--lease-interval",
        )
    try:
        settings.api_token, token_note = resolve_api_token(settings)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot read the API token: {exc}") from None
    sock = _listen(host, port)  # before migrations: a port in use is told at once
    if processes > 1:
        sock.close()  # uvicorn's process manager binds it again
    click.echo(
        f"Flux server on http://{host}:{port}  database: {redact_url(settings.database_url)}  home: {settings.home}"
        + (f"  processes: {processes}" if processes > 1 else "")
    )
    if token_note:
        click.echo(token_note)
    _check_secrets_key(settings)
    record = run_file(settings, bootstrap_token_file, given=bool(settings.bootstrap_token and not bootstrap_token_file))
    with announced(record) as ready:
        if processes == 1:
            from flux.server.app import create_app

            serve(create_app(settings), settings, sock, on_ready=ready)
        else:
            ready()  # uvicorn's process manager binds and listens in each process
            serve_processes(settings)


@contextlib.contextmanager
def announced(record: RunFile) -> Iterator[Callable[[], None]]:
    """The call that, once the server listens, prints where its console and bootstrap token
    are with a worker's command line, and leaves its run file (removed at stop)."""
    left: list[Path] = []

    def ready() -> None:
        for line in ready_lines(record):
            click.echo(line)
        try:
            left.append(runfiles.write(record))
        except OSError as exc:  # a read-only HOME (a container): only local look-ups are lost
            click.echo(f"no run file for local commands ({exc.strerror}: {exc.filename})", err=True)

    try:
        yield ready
    finally:
        for path in left:
            runfiles.remove(path)


def _listen(host: str, port: int) -> socket.socket:
    from flux.server.serve import listen

    try:
        return listen(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(
                f"cannot start: {host}:{port} is in use (another Flux server?); stop it or choose --port"
            ) from None
        raise click.ClickException(f"cannot start: cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _check_secrets_key(settings: ServerSettings) -> None:
    """Stored secrets and no key (or the wrong one): refuse to start, with the reason."""
    from flux.server.secrets import SecretsKeyError, check_at_start, home_key
    from flux.server.settings import prepare_home

    prepare_home(settings)
    try:
        settings.secrets_key_file = home_key(settings.home, settings.database_url, settings.secrets_key_file)
        check_at_start(settings.database_url, settings.secrets_key_file)
    except (SecretsKeyError, OSError) as exc:
        raise click.ClickException(f"cannot start: {exc}") from None
    settings.migrated = True


@start.command("worker")
@click.argument("name")
@click.option(
    "--server-url",
    envvar="FLUX_SERVER_URL",
    default=DEFAULT_SERVER_URL,
    show_default=True,
    help="Server URL; several comma-separated replicas fail over in turn",
)
@click.option(
    "--bootstrap-token",
    envvar="FLUX_BOOTSTRAP_TOKEN",
    default=None,
    help="Token from 'flux server bootstrap-token' (read from --home when omitted); "
    "prefer the environment or --bootstrap-token-file",
)
@bootstrap_token_file_option
@home_option(
    "Folder for this worker's identity (workers/NAME.token, .lock) and, when no token is given, "
    "the server's bootstrap token"
)
@click.option(
    "--label",
    "labels",
    envvar="FLUX_LABELS",
    multiple=True,
    help="KEY=VALUE, repeatable (FLUX_LABELS: space-separated); matched by workflow affinity",
)
@click.option(
    "--max-concurrent-executions",
    envvar="FLUX_MAX_CONCURRENT_EXECUTIONS",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Executions this worker runs at once (its slots)",
)
@click.option(
    "--heartbeat-interval",
    envvar="FLUX_HEARTBEAT_INTERVAL",
    type=FiniteRange(min=0.01),
    default=5.0,
    show_default=True,
    help="Seconds between heartbeats (liveness, resource samples, cancellations)",
)
@click.option(
    "--runner",
    envvar="FLUX_RUNNER",
    type=click.Choice(RUNNER_NAMES),
    default="subprocess",
    show_default=True,
    help="Where an execution runs: a child process, this process, or a docker container",
)
@click.option(
    "--gpu-source",
    envvar="FLUX_GPU_SOURCE",
    default="auto",
    show_default=True,
    help="auto (NVML, then GPUtil), nvml, gputil, none, or nvml:module:attribute (an NVML-compatible binding)",
)
@click.option(
    "--metrics-provider",
    envvar="FLUX_METRICS_PROVIDER",
    default=None,
    help="module:function returning live metrics (dict of floats) for routing policies",
)
@click.option(
    "--allocation",
    envvar="FLUX_ALLOCATION",
    type=click.Choice([mode.value for mode in AllocationMode]),
    default=AllocationMode.SAMPLE.value,
    show_default=True,
    help="Match against sampled availability (spec) or capacity minus what running executions were allotted",
)
@click.option(
    "--enforce-requests/--no-enforce-requests",
    envvar="FLUX_ENFORCE_REQUESTS",
    default=False,
    show_default=True,
    help="Derive CPU pinning and memory ceilings from each execution's request",
)
@click.option(
    "--subprocess-memory-limit",
    envvar="FLUX_SUBPROCESS_MEMORY_LIMIT",
    type=QUANTITY,
    default=None,
    help="Address-space ceiling for every subprocess child (e.g. 2Gi)",
)
@click.option(
    "--max-executions-per-child",
    envvar="FLUX_MAX_EXECUTIONS_PER_CHILD",
    type=click.IntRange(1),
    default=100,
    show_default=True,
    help="Executions a subprocess child serves in turn; 1 = a fresh process for each",
)
@click.option(
    "--warm-children",
    envvar="FLUX_WARM_CHILDREN",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="Subprocess children kept started ahead of demand (a burst grows the pool up to the slots)",
)
@click.option(
    "--child-idle-timeout",
    envvar="FLUX_CHILD_IDLE_TIMEOUT",
    type=FiniteRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds an idle child beyond --warm-children lives before it exits",
)
@click.option(
    "--docker-image",
    envvar="FLUX_DOCKER_IMAGE",
    default="python:3.11-slim",
    show_default=True,
    help="Image the docker runner starts executions in",
)
@click.option(
    "--docker-memory", envvar="FLUX_DOCKER_MEMORY", type=QUANTITY, default=None, help="--memory for every container"
)
@click.option(
    "--docker-cpus",
    envvar="FLUX_DOCKER_CPUS",
    type=FiniteRange(min=0, min_open=True),
    default=None,
    help="--cpus for every container",
)
@click.option(
    "--docker-arg",
    "docker_args",
    envvar="FLUX_DOCKER_ARGS",
    multiple=True,
    help="Extra 'docker run' argument, repeatable",
)
@click.option(
    "--docker-fallback",
    envvar="FLUX_DOCKER_FALLBACK",
    type=click.Choice(["none", "subprocess"]),
    default="none",
    show_default=True,
    help="With --runner docker and no Docker engine answering: refuse to start (none), "
    "or run executions as child processes instead (subprocess)",
)
@click.option(
    "--cgroup-root",
    envvar="FLUX_CGROUP_ROOT",
    default=DEFAULT_CGROUP_ROOT,
    show_default=True,
    help="Where the cgroup filesystem is: the probe advertises the smaller of the host's and the "
    "cgroup's CPU quota and memory limit (a path that does not exist: the host's figures)",
)
@click.option(
    "--disk-path",
    envvar="FLUX_DISK_PATH",
    default=".",
    show_default=True,
    help="Disk figures are this path's filesystem (default: the working directory, where executions run)",
)
@click.option(
    "--resource",
    "custom_resources",
    envvar="FLUX_RESOURCES",
    multiple=True,
    help="NAME=AMOUNT custom resource to advertise (e.g. fpga=2), repeatable; requested with resources={...}",
)
@click.option(
    "--namespace",
    "namespaces",
    envvar="FLUX_WORKER_NAMESPACES",
    multiple=True,
    help="Take executions of this namespace only, repeatable (FLUX_WORKER_NAMESPACES: comma-separated); "
    "none: every namespace",
)
@click.option(
    "--drain-timeout",
    envvar="FLUX_DRAIN_TIMEOUT",
    type=FiniteRange(min=0),
    default=60.0,
    show_default=True,
    help="On SIGTERM/SIGINT, seconds running executions may finish before they are handed back to resume elsewhere",
)
@click.option(
    "--max-log-bytes",
    envvar="FLUX_MAX_LOG_BYTES",
    type=QUANTITY,
    default="10Mi",
    show_default=True,
    help="Output an attempt may ship to the server (bytes or a quantity); the rest is dropped, with a note",
)
@click.option(
    "--log-buffer-lines",
    envvar="FLUX_LOG_BUFFER_LINES",
    type=click.IntRange(1),
    default=10_000,
    show_default=True,
    help="Lines held per execution before its output waits for the server to take them",
)
@click.option(
    "--capture-output/--no-capture-output",
    envvar="FLUX_CAPTURE_OUTPUT",
    default=True,
    show_default=True,
    help="Capture what executions print and log and keep it with them on the server; "
    "off: their output goes to this worker's stderr",
)
@click.option(
    "--bundle-cache-size",
    envvar="FLUX_BUNDLE_CACHE_SIZE",
    type=QUANTITY,
    default="2Gi",
    show_default=True,
    help="Disk kept for unpacked workflow bundles; past it the least recently used are removed",
)
@click.option(
    "--bundle-cache-dir",
    envvar="FLUX_BUNDLE_CACHE_DIR",
    type=click.Path(file_okay=False),
    default=None,
    help="Where unpacked bundles are kept [HOME/bundle-cache/NAME]",
)
@click.option(
    "--advertise-address",
    envvar="FLUX_ADVERTISE_ADDRESS",
    default=None,
    help="Host the other members of a gang reach this worker's members at (MASTER_ADDR for rank 0; "
    "docs/gangs.md) [this host's address toward the server]",
)
@click.option(
    "--fork-children/--no-fork-children",
    envvar="FLUX_FORK_CHILDREN",
    default=True,
    show_default=True,
    help="Fork subprocess children from a template process made at start, sharing this worker's "
    "memory (Linux); off: each child starts a fresh interpreter",
)
@log_format_option
def start_worker(
    name: str,
    server_url: str,
    bootstrap_token: str | None,
    bootstrap_token_file: str | None,
    home: str | None,
    labels: tuple[str, ...],
    max_concurrent_executions: int,
    heartbeat_interval: float,
    runner: str,
    gpu_source: str,
    metrics_provider: str | None,
    allocation: str,
    enforce_requests: bool,
    subprocess_memory_limit: int | None,
    max_executions_per_child: int,
    warm_children: int,
    child_idle_timeout: float,
    docker_image: str,
    docker_memory: int | None,
    docker_cpus: float | None,
    docker_args: tuple[str, ...],
    docker_fallback: str,
    cgroup_root: str,
    disk_path: str,
    custom_resources: tuple[str, ...],
    namespaces: tuple[str, ...],
    drain_timeout: float,
    max_log_bytes: int,
    log_buffer_lines: int,
    capture_output: bool,
    bundle_cache_size: int,
    bundle_cache_dir: str | None,
    advertise_address: str | None,
    fork_children: bool,
    log_format: str,
) -> None:
    """Run a worker named NAME that executes workflows dispatched by the server.

    It retries while the server cannot be reached; a server that refuses it (a wrong
    bootstrap token, its name held by another worker) ends it with the reason."""
    import asyncio

    served = parse_worker_namespaces(namespaces)
    token = token_from_file(bootstrap_token_file, "bootstrap") if bootstrap_token_file else bootstrap_token
    token = token or bootstrap_token_for_worker(server_url, home)
    template = None
    if fork_children and runner == "subprocess":
        import flux.worker.runners.base  # noqa: F401 - the job both sides decode (pydantic): its pages shared
        from flux.worker.runners.template import ChildTemplate

        # While this process has one thread, and before it imports the worker's own
        # modules, which the children never need (docs/footprint.md).
        template = ChildTemplate.fork()
    from flux.worker import Worker, WorkerConfig

    configure_logging(log_format)
    config = WorkerConfig(
        name=name,
        server_url=server_url,
        bootstrap_token=token,
        labels=parse_labels(labels),
        max_concurrent_executions=max_concurrent_executions,
        heartbeat_interval=heartbeat_interval,
        runner=runner,
        gpu_source=gpu_source,
        metrics_provider=metrics_provider,
        allocation=allocation,
        enforce_requests=enforce_requests,
        subprocess_memory_limit=subprocess_memory_limit,
        max_executions_per_child=max_executions_per_child,
        warm_children=warm_children,
        child_idle_timeout=child_idle_timeout,
        docker_image=docker_image,
        docker_memory=docker_memory,
        docker_cpus=docker_cpus,
        docker_args=docker_args,
        docker_fallback=docker_fallback,
        cgroup_root=cgroup_root,
        disk_path=disk_path,
        custom_resources=parse_resources(custom_resources),
        namespaces=served,
        drain_timeout=drain_timeout,
        home=str(ServerSettings(home=home or default_home()).home),
        max_log_bytes=max_log_bytes,
        log_buffer_lines=log_buffer_lines,
        capture_output=capture_output,
        bundle_cache_size=bundle_cache_size,
        bundle_cache_dir=bundle_cache_dir,
        advertise_address=advertise_address,
    )
    asyncio.run(Worker(config, template=template).run())


@click.group()
def server() -> None:
    """Server administration."""


@server.command("migrate")
@home_option()
@click.option(
    "--database-url", envvar="FLUX_DATABASE_URL", default=None, help="SQLAlchemy URL [sqlite:///HOME/flux.db]"
)
def server_migrate(home: str | None, database_url: str | None) -> None:
    """Bring the database schema to the newest version (the server also does this on start)."""
    from flux.server.database import migrate

    settings = ServerSettings(home=home or default_home(), database_url=database_url)
    prepare_home(settings)
    migrate(settings.database_url)
    click.echo(f"database at the newest schema: {redact_url(settings.database_url)}")


@server.command("bootstrap-token")
@home_option()
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="The running server on this port")
def bootstrap_token(home: str | None, port: int | None) -> None:
    """Print the token workers present to register: the running server's (whatever its
    --home), or, where no server runs, HOME's (made on first use, and said so)."""
    click.echo(bootstrap_token_for_admin(home, port))


@click.command()
@click.option("--keep-home", is_flag=True, help="Keep the demo's database folder")
def demo(keep_home: bool) -> None:
    """Start a server on SQLite and a local worker, run an example, explain what happened."""
    from flux.cli.demo import run_demo

    run_demo(console.real, keep_home=keep_home)
