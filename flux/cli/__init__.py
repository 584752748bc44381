"""The ``flux`` command line: start processes, register and run workflows, follow and
inspect executions and workers.

Rooms: ``core`` (the group, failures as one line and an exit code, client options,
output helpers), ``start`` (server, worker, demo), ``workflows``, ``executions``,
``workers``, ``schedules``, ``watch`` (following an execution live), ``cache`` (the task cache),
``secrets`` (the secret store). ``flux.cli:main`` is the
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

from flux.cli.cache import cache_group  # noqa: E402 - after the httpx deferral
from flux.cli.core import FluxGroup, client_commands, show_envvars
from flux.cli.executions import execution_group
from flux.cli.schedules import schedule_group
from flux.cli.secrets import secret_group
from flux.cli.start import demo, server, start, start_server, start_worker
from flux.cli.workers import worker_group
from flux.cli.workflows import workflow_group


@click.group(cls=FluxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="flux-engine", help="Print the version and exit")
@click.option("--config", envvar="FLUX_CONFIG", type=click.Path(dir_okay=False), default=None,
              help="TOML settings: [server], [worker] for 'start', [client] for the rest [./flux.toml if present]")
@click.option("--debug", envvar="FLUX_DEBUG", is_flag=True,
              help="On failure, show the Python traceback instead of one line")
@click.pass_context
def main(ctx: click.Context, config: str | None, debug: bool) -> None:
    """Flux: durable Python workflows on a fleet of resource-aware workers.

    Exit codes: 0 success, 1 failure (with --wait: the execution FAILED), 2 usage
    or connection error, 3 the execution was CANCELLED, 4 it still runs when
    --wait gave up."""
    from flux.config import load_default_map

    ctx.default_map = load_default_map(
        config, {"server": start_server, "worker": start_worker}, client_commands(ctx.command)
    )


for _command in (start, server, workflow_group, execution_group, schedule_group, worker_group, cache_group, secret_group, demo):
    main.add_command(_command)
show_envvars(main)

__all__ = ["main"]
