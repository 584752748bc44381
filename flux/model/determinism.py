"""Deterministic builtins: ``await now()``, ``uuid4()``, ``randint(a, b)``, ``choice(seq)``
and ``random()`` inside a workflow.

A workflow is replayed after a crash; a clock or a random number read in its code would
differ on the replay and send it down another path. Each call of these is recorded
(VALUE_RECORDED, under a call id such as ``now:1``, counted per builtin in call order,
like task ids) and a replay returns the recorded value instead of a new one.

Inside a task's body, and outside any workflow, they return fresh values: the task's
result is what is recorded there.
"""

from __future__ import annotations

import datetime as _datetime
import random as _random
import uuid as _uuid
from typing import Any, Awaitable, Callable, Sequence

from flux.domain.events import EventType, make_event
from flux.model.runtime import current_context, current_task, to_json_value

__all__ = ["choice", "now", "randint", "random", "uuid4"]


def _recorded(name: str, compute: Callable[[], Any]) -> Awaitable[Any]:
    """The call id is taken now (call order, as for tasks); the value when awaited."""
    ctx = current_context()
    if ctx is None or current_task() is not None:
        return _fresh(compute)
    call_id = ctx.next_value_id(name)

    async def value() -> Any:
        if call_id in ctx.recorded:
            return ctx.recorded[call_id]
        recorded = to_json_value(compute(), f"the value of {name}() ({call_id})")
        ctx.recorded[call_id] = recorded
        ctx.emit(make_event(EventType.VALUE_RECORDED, name, call_id, recorded))
        return recorded

    return value()


async def _fresh(compute: Callable[[], Any]) -> Any:
    return compute()


async def _converted(recorded: Awaitable[Any], convert: Callable[[Any], Any]) -> Any:
    return convert(await recorded)


def now() -> Awaitable[_datetime.datetime]:
    """The current time (UTC, timezone-aware), the same on every replay."""
    stamp = _recorded("now", lambda: _datetime.datetime.now(_datetime.UTC).isoformat())
    return _converted(stamp, _datetime.datetime.fromisoformat)


def uuid4() -> Awaitable[_uuid.UUID]:
    """A random UUID, the same on every replay."""
    return _converted(_recorded("uuid4", lambda: str(_uuid.uuid4())), _uuid.UUID)


def randint(a: int, b: int) -> Awaitable[int]:
    """A random integer N with a <= N <= b, the same on every replay."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int) or not isinstance(b, int) or a > b:
        raise ValueError(f"randint needs integers a <= b, got {a!r}, {b!r}")
    return _recorded("randint", lambda: _random.randint(a, b))


def random() -> Awaitable[float]:
    """A random float in [0.0, 1.0), the same on every replay."""
    return _recorded("random", _random.random)


def choice(seq: Sequence[Any]) -> Awaitable[Any]:
    """A random element of a non-empty sequence, the same on every replay. The index is
    recorded, so the elements need not be JSON."""
    items = list(seq)
    if not items:
        raise IndexError("choice() of an empty sequence")
    return _converted(_recorded("choice", lambda: _random.randrange(len(items))), items.__getitem__)
