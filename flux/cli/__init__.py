"""The ``flux`` command line: start processes, register and run workflows, follow and
inspect executions and workers.

Rooms: ``core`` (the group, failures as one line and an exit code, client options),
``output`` (consoles, tables, records), ``start`` (server, worker, demo), ``workflows``, ``executions``,
``workers``, ``pools`` (worker pools that scale on demand), ``schedules``, ``watch`` (following an
execution live), ``cache`` (the task cache),
``secrets`` (the secret store), ``hooks`` (webhooks), ``namespaces``, ``tokens`` (client tokens and their
roles), ``audit`` (the audit log). ``flux.cli:main`` is the
console script; ``python -m flux`` and ``python -m flux.cli`` run it too.
"""

from __future__ import annotations

import sys
import types

import click


def _defer_httpx_cli() -> None:
    """httpx imports its own command line (click, rich, pygments: ~0.05 s and a few MiB)
    whenever they are installed; no flux process runs it, so it is loaded only if
    ``httpx.main`` is ever called (docs/footprint.md)."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stub = types.ModuleType("httpx._main")

    def main(*args, **kwargs):  # the real one, on first use
        del sys.modules["httpx._main"]
        from httpx._main import main as real

        return real(*args, **kwargs)

    stub.main = main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stub


_defer_httpx_cli()

from flux.cli.core import FluxGroup, TopOptions, client_commands  # noqa: E402 - after the httpx deferral

#: Each command's module is imported when the command is used (or listed in --help):
#: ``flux start worker`` never pays for the client commands, nor they for the server's
#: (docs/footprint.md).
COMMANDS = {
    "start": "flux.cli.start:start",
    "server": "flux.cli.start:server",
    "workflow": "flux.cli.workflows:workflow_group",
    "execution": "flux.cli.executions:execution_group",
    "schedule": "flux.cli.schedules:schedule_group",
    "worker": "flux.cli.workers:worker_group",
    "pool": "flux.cli.pools:pool_group",
    "cache": "flux.cli.cache:cache_group",
    "secret": "flux.cli.secrets:secret_group",
    "hook": "flux.cli.hooks:hook_group",
    "namespace": "flux.cli.namespaces:namespace_group",
    "token": "flux.cli.tokens:token_group",
    "audit": "flux.cli.audit:audit_group",
    "migrate": "flux.cli.migrate:migrate_group",
    "demo": "flux.cli.start:demo",
}


@click.group(cls=FluxGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="flux-engine", help="Print the version and exit")
@click.option(
    "--config",
    envvar="FLUX_CONFIG",
    type=click.Path(dir_okay=False),
    default=None,
    help="TOML settings: [server], [worker] for 'start', [client] for the rest [./flux.toml if present]",
)
@click.option(
    "--debug", envvar="FLUX_DEBUG", is_flag=True, help="On failure, show the Python traceback instead of one line"
)
@click.option(
    "--server-url", default=None, help="For every client command below: the Flux server's URL (its own flag wins)"
)
@click.option("--namespace", "-n", default=None, help="For every client command below: the namespace it acts in")
@click.option(
    "--api-token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="For every client command below: the file holding the API token",
)
@click.pass_context
def main(
    ctx: click.Context,
    config: str | None,
    debug: bool,
    server_url: str | None,
    namespace: str | None,
    api_token_file: str | None,
) -> None:
    """Flux: durable Python workflows on a fleet of resource-aware workers.

    Exit codes: 0 success, 1 failure (with --wait: the execution FAILED), 2 usage
    or connection error, 3 the execution was CANCELLED, 4 it still runs when
    --wait gave up."""
    from flux.cli.config import load_default_map

    def sections() -> dict[str, click.Command]:
        from flux.cli.start import start_server, start_worker

        return {"server": start_server, "worker": start_worker}

    ctx.default_map = load_default_map(config, sections, lambda: client_commands(ctx.command))
    given = {"server_url": server_url, "namespace": namespace, "api_token_file": api_token_file}
    ctx.obj = TopOptions({name: value for name, value in given.items() if value is not None})


__all__ = ["main"]
