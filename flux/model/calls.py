"""Calling the functions a task names as options (``fallback``, ``rollback``) and
describing what they raise: shared by the runtime and the saga, which import
nothing else of the programming model."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable


def describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def call_with(function: Callable[..., Any], args: tuple, kwargs: dict, **extra: Any) -> Any:
    """Call a fallback or rollback: a Task (its function, not a recorded call), an
    async function or a plain one (on a thread).

    ``secrets`` (in ``kwargs``) and each keyword of ``extra`` (a rollback's ``result``)
    reach only a function with a parameter of that name, so a plain ``def undo(order)``
    works beside a task that takes ``secrets``."""
    target = getattr(function, "fn", function)
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):  # a builtin without a signature: pass what was given
        parameters = None
    wanted = {**kwargs, **extra}
    if parameters is not None and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        for name in ("secrets", *extra):
            if name in wanted and name not in parameters:
                del wanted[name]
    if inspect.iscoroutinefunction(target):
        return await target(*args, **wanted)
    return await asyncio.to_thread(target, *args, **wanted)
