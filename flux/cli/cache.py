"""``flux cache clear``: invalidate cached task results (docs/tasks.md#cache)."""

from __future__ import annotations

import click

from flux.cli.core import client_command
from flux.client import FluxClient


@click.group("cache")
def cache_group() -> None:
    """The task cache (results of cache=True tasks)."""


@cache_group.command("clear")
@click.option("--task", default=None, help="Only this task's entries (its name)")
@click.option("--expired", is_flag=True, help="Only entries past their cache_ttl")
@client_command
def cache_clear(client: FluxClient, task: str | None, expired: bool) -> dict:
    """Delete cached results, so the next call of the task runs it again."""
    return client.clear_cache(task=task, expired=expired)
