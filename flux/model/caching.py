"""``cache=True`` on a task: its result is reused across executions for the same task
version and arguments (docs/tasks.md#cache).

The key is the sha256 of canonical JSON (sorted keys, no spaces) of the task's name, its
version (a digest of the function's compiled code and defaults: editing the task
makes new keys, an unchanged task keeps them on every worker with the same Python) and
its arguments. On a worker the lookup is one round trip (the child asks its worker,
which asks the server: ``POST /cache/lookup``); the write is no round trip at all: the
TASK_CACHE_STORED event that follows the task's TASK_COMPLETED makes the server store
the result when it checkpoints them, in the same transaction. A local run
(``Workflow.run``) uses a cache in this process.

A replayed task never looks the cache up: its result is in the log already.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
import types
from typing import Any

from flux.domain.events import EventType, make_event

#: ``lookup``'s answer when nothing usable is cached.
MISS = object()

#: A local run's cache: key -> (result, expires at or None), for this process's life.
LOCAL: dict[str, tuple[Any, float | None]] = {}


def _code_digest(code: types.CodeType, digest: "hashlib._Hash") -> None:
    """Fold what a function computes into ``digest``: bytecode, names, constants (nested
    functions included), never file names or line numbers (they differ between workers)."""
    digest.update(code.co_code)
    digest.update(
        repr((code.co_names, code.co_varnames, code.co_freevars, code.co_argcount, code.co_kwonlyargcount)).encode()
    )
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_digest(const, digest)
        else:
            digest.update(repr(const).encode())


@functools.lru_cache(maxsize=1024)
def version_of(fn: Any) -> str:
    """The task's version: its function's code and default values, as a digest."""
    target = getattr(fn, "__wrapped__", fn)
    digest = hashlib.sha256()
    code = getattr(target, "__code__", None)
    if code is not None:
        _code_digest(code, digest)
    digest.update(repr((getattr(target, "__defaults__", None), getattr(target, "__kwdefaults__", None))).encode())
    return digest.hexdigest()


def key_for(task: Any, args: tuple, kwargs: dict) -> str:
    """The cache key of one call; ``TypeError`` naming the task when an argument is not JSON."""
    try:
        arguments = json.dumps([list(args), kwargs], sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"task {task.name!r} has cache=True: its arguments must be JSON-serialisable ({exc})") from None
    identity = json.dumps({"task": task.name, "version": version_of(task.fn)}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{identity}\n{arguments}".encode()).hexdigest()


async def lookup(ctx: Any, key: str) -> Any:
    """The cached result, or ``MISS``."""
    if ctx.ask is not None:
        answer = await ctx.ask("cache.lookup", {"key": key})
        return answer["value"] if answer.get("hit") else MISS
    entry = LOCAL.get(key)
    if entry is None or (entry[1] is not None and entry[1] <= time.time()):
        LOCAL.pop(key, None)
        return MISS
    return entry[0]


def store(ctx: Any, task: Any, task_id: str, key: str, result: Any) -> None:
    """Record that the result just completed is cached (the server stores it on checkpoint)."""
    ttl = task.options.cache_ttl
    ctx.emit(make_event(EventType.TASK_CACHE_STORED, task.name, task_id, {"key": key, "ttl": ttl}))
    if ctx.ask is None:
        LOCAL[key] = (result, time.time() + ttl if ttl else None)
