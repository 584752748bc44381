"""``pipeline`` and ``map``: common shapes of task calls, built on the same machinery.

Both call the tasks in a fixed order, so task ids (``name:n``) are the same on every
replay and completed calls are replayed, never run again. ``map`` takes its ids for
every item up front, in item order, then runs at most ``concurrency`` at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable

from flux.model.task import parallel

__all__ = ["map", "pipeline"]

_NOT_GIVEN = object()


async def pipeline(*tasks: Callable[[Any], Any], input: Any = _NOT_GIVEN) -> Any:  # noqa: A002 - the issue's name
    """``await pipeline(parse, enrich, store, input=raw)``: each task gets the previous
    one's result (the first gets ``input``); returns the last result."""
    if not tasks:
        raise ValueError("pipeline needs at least one task")
    for position, step in enumerate(tasks, 1):
        if not callable(step):
            raise ValueError(f"pipeline step {position} must be a task or function, got {step!r}")
    if input is _NOT_GIVEN:
        raise ValueError("pipeline needs input= (the first task's argument)")
    value = input
    for step in tasks:
        value = step(value)
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            value = await value
    return value


async def map(task: Callable[[Any], Any], items: Iterable[Any], concurrency: int | None = None) -> list[Any]:  # noqa: A001
    """``await map(resize, images, concurrency=4)``: ``task(item)`` for each item, at most
    ``concurrency`` running at once (None: all), results in item order. If one fails,
    the others are cancelled before the error propagates (as ``parallel`` does)."""
    if not callable(task):
        raise ValueError(f"map needs a task, got {task!r}")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ValueError(f"map: concurrency must be an int >= 1 or None, got {concurrency!r}")
    calls = [task(item) for item in items]  # ids taken now, in item order
    gate = asyncio.Semaphore(concurrency or max(len(calls), 1))

    async def gated(call: Any) -> Any:
        async with gate:
            return await call

    try:
        return await parallel(*(gated(call) for call in calls))
    finally:
        for call in calls:  # any cancelled before it started was never awaited (a no-op for the others)
            if asyncio.iscoroutine(call):
                call.close()
