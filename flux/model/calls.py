"""Calling the functions a task names as options (``fallback``, ``rollback``) and
describing what they raise: shared by the runtime and the saga, which import
nothing else of the programming model."""

from __future__ import annotations

import asyncio
import inspect
import os
import sysconfig
import traceback
from typing import Any, Callable

from flux.protocol.failures import MAX_CHAIN, MAX_FRAMES, MAX_TEXT, Failure, Frame, RaisedError

#: Where frames that are not the user's live: Flux itself and the standard library.
_NOT_USERS = tuple(
    os.path.join(os.path.realpath(path), "")
    for path in {
        os.path.dirname(os.path.dirname(__file__)),
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["platstdlib"],
    }
)


#: Folders of unpacked bundles (as given and resolved, each ending in a separator): a file
#: under one is shown by its name in the bundle ("train.py", "pkg/util.py").
_BUNDLE_ROOTS: set[str] = set()


def name_files_under(root: str) -> None:
    """Show the files of the bundle unpacked at ``root`` by their names in it: the worker's
    cache path (``~/.flux/bundle-cache/w1/6e0087.../train.py``) says nothing to their author."""
    _BUNDLE_ROOTS.update(os.path.join(path, "") for path in (os.path.abspath(root), os.path.realpath(root)))


def in_bundle(text: str) -> str:
    """``text`` (a file name, or a whole traceback) with every bundle folder left out."""
    for root in sorted(_BUNDLE_ROOTS, key=len, reverse=True):
        text = text.replace(root, "")
    return text


def describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def failure_of(exc: BaseException) -> dict:
    """``exc`` as a ``Failure`` in its wire form: type, message, the chain's frames
    (each marked the user's or not) and the traceback as Python prints it, bounded."""
    chain: list[RaisedError] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    leads_by = None
    while current is not None and id(current) not in seen and len(chain) < MAX_CHAIN:
        seen.add(id(current))
        chain.append(
            RaisedError(
                type=_type_name(current), message=_cut(str(current)), frames=_frames(current), leads_by=leads_by
            )
        )
        if current.__cause__ is not None:
            current, leads_by = current.__cause__, "cause"
        elif current.__context__ is not None and not current.__suppress_context__:
            current, leads_by = current.__context__, "context"
        else:
            current = None
    chain.reverse()  # oldest first, as Python prints it: each link says how it led to the next
    text = in_bundle("".join(traceback.format_exception(exc)))
    failure = Failure(type=_type_name(exc), message=_cut(str(exc)), traceback=text[-MAX_TEXT * 4 :], chain=chain)
    return failure.model_dump()


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    return (
        kind.__qualname__ if kind.__module__ in ("builtins", "__main__") else f"{kind.__module__}.{kind.__qualname__}"
    )


def _frames(exc: BaseException) -> list[Frame]:
    summary = traceback.extract_tb(exc.__traceback__)[-MAX_FRAMES:]
    return [
        Frame(
            file=in_bundle(entry.filename),
            line=entry.lineno,
            function=entry.name,
            code=_cut(entry.line or "") or None,
            user=_users(entry.filename),
        )
        for entry in summary
    ]


def _users(filename: str) -> bool:
    return not (filename.startswith("<") or os.path.realpath(filename).startswith(_NOT_USERS))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


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
