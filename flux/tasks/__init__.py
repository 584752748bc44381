"""flux-core's ``flux.tasks``: the same durable builtins as ``flux.*``, under the names
and call forms flux-core code imports (docs/migrating-from-flux-core.md).

``pause(name, output=...)`` is ``flux.pause(name, payload=...)``; ``parallel`` takes
flux-core's ``max_concurrent``; ``randrange`` is built on the recorded ``randint``.
Everything here is recorded and replayed like the native names it calls.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from flux.domain.names import NAME_PATTERN
from flux.model.composition import pipeline
from flux.model.determinism import choice, now, randint, uuid4
from flux.model.runtime import current_task, progress
from flux.model.task import parallel as _parallel
from flux.model.waits import call
from flux.model.waits import pause as _pause
from flux.model.waits import sleep as _sleep
from flux.tasks.graph import Graph

__all__ = [
    "Graph",
    "call",
    "choice",
    "now",
    "parallel",
    "pause",
    "pipeline",
    "progress",
    "randint",
    "randrange",
    "sleep",
    "uuid4",
]


async def pause(name: str, output: Any = None, *, until: Any = None, after: Any = None, on_complete: Any = None) -> Any:
    """flux-core's ``pause(name, output)``: ``flux.pause(name, payload=output)``. A pause
    that wakes by itself (``until=``, ``after=``, ``on_complete=``) is refused: here that
    is ``await sleep(...)`` or ``await call(workflow)``."""
    for option, value in (("until", until), ("after", after), ("on_complete", on_complete)):
        if value is not None:
            raise ValueError(
                f"pause({option}=...) is flux-core's self-waking pause; use flux.sleep(...) or flux.call(...) here"
            )
    if not isinstance(name, str) or not re.match(NAME_PATTERN, name):  # flux-core took any value as the name
        return await _pause(_named(name), {"name": name, "output": output} if output is not None else name)
    return await _pause(name, output)


def _named(name: Any) -> str:
    """A pause name this engine takes, from flux-core's free-form one."""
    if not isinstance(name, str):
        return "pause"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")[:128] or "pause"


async def parallel(*awaitables: Any, max_concurrent: int | None = None, raise_on_error: bool = True) -> list[Any]:
    """flux-core's ``parallel(*calls, max_concurrent=n)``: ``flux.parallel`` with at most
    ``n`` running at once. ``raise_on_error=False`` (a failed call's slot becomes None)
    is refused: a failure here always fails the batch."""
    if not raise_on_error:
        raise ValueError(
            "parallel(raise_on_error=False) is flux-core's; catch the TaskFailedError of each call instead"
        )
    if max_concurrent is None:
        return await _parallel(*awaitables)
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
    gate = asyncio.Semaphore(max_concurrent)

    async def gated(awaitable: Any) -> Any:
        async with gate:
            return await awaitable

    return await _parallel(*(gated(awaitable) for awaitable in awaitables))


async def sleep(duration: Any) -> None:
    """``flux.sleep`` in the workflow's body; inside a task (where flux-core allowed it) a plain sleep."""
    if current_task() is not None:
        seconds = duration.total_seconds() if hasattr(duration, "total_seconds") else float(duration)
        await asyncio.sleep(seconds)
        return
    await _sleep(duration)


async def randrange(start: int, stop: int | None = None, step: int = 1) -> int:
    """``random.randrange``, recorded: the same on every replay."""
    low, high = (0, start) if stop is None else (start, stop)
    count = len(range(low, high, step))
    if count == 0:
        raise ValueError(f"empty range for randrange({start}, {stop}, {step})")
    return low + step * await randint(0, count - 1)
