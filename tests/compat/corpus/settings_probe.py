"""flux.config.Configuration read from a task, as flux-core code reads the engine's home
and server; a key this engine lacks raises AttributeError naming it."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.config import Configuration


@task
async def where_am_i() -> dict:
    settings = Configuration.get().settings
    try:
        settings.security
        missing = None
    except AttributeError as error:
        missing = "settings.security" in str(error)
    return {
        "has_home": bool(settings.home),
        "scheme": settings.workers.server_url.split(":")[0],
        "missing_named": missing,
    }


@workflow
async def settings_probe(ctx: ExecutionContext):
    return await where_am_i()


if __name__ == "__main__":
    print(settings_probe.run().to_json())
