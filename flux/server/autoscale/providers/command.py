"""``command``: a user's executable, run with the pool's desired size as its last
argument (any cloud's CLI, a script). It also reads ``FLUX_POOL``, ``FLUX_POOL_SIZE``,
``FLUX_POOL_START`` and ``FLUX_POOL_STOP`` (space-separated worker names) and
``FLUX_SERVER_URL``; the workers it starts register as ``flux.pool=NAME`` workers and
are adopted by name. A non-zero exit is a failure, reported with its stderr's tail."""

from __future__ import annotations

import asyncio
import os

from flux.server.autoscale.providers.base import Change, Provider, ProviderError
from flux.server.autoscale.schemas import CommandOptions

#: Characters of a failing command's stderr kept in the pool's state.
ERROR_TAIL = 500


class CommandProvider(Provider):
    async def apply(self, change: Change) -> dict[str, str]:
        options = CommandOptions.model_validate(change.options)
        env = {
            **os.environ,
            "FLUX_POOL": change.pool,
            "FLUX_POOL_SIZE": str(change.size),
            "FLUX_POOL_START": " ".join(change.start),
            "FLUX_POOL_STOP": " ".join(s.name for s in change.stop),
            "FLUX_SERVER_URL": self.context.server_url,
        }
        for secret in ("FLUX_BOOTSTRAP_TOKEN", "FLUX_API_TOKEN"):
            env.pop(secret, None)
        try:
            process = await asyncio.create_subprocess_exec(
                *options.command,
                str(change.size),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise ProviderError(f"could not run {options.command[0]}: {exc.strerror or exc}") from None
        try:
            _, stderr = await asyncio.wait_for(process.communicate(), options.timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise ProviderError(f"{options.command[0]} did not finish within {options.timeout:g}s") from None
        if process.returncode != 0:
            tail = stderr.decode(errors="replace").strip()[-ERROR_TAIL:]
            raise ProviderError(f"{options.command[0]} exited {process.returncode}" + (f": {tail}" if tail else ""))
        return {}
