"""Payloads: an execution's input, each task's result and the workflow's output.

Each is one JSON value, stored once (events that carry it hold a reference, resolved
when the log is read), and none may be larger, JSON-encoded, than the server's
``max_payload_size``: the server refuses an input over it at submission, the child
fails a task whose result (or a workflow whose output) is over it, naming the limit,
the task and the size (docs/history.md). One rule, used on both sides.

The same holds for nesting: the server refuses a request body nested deeper than its
``max_json_depth`` (``flux.server.request_limits``), and a checkpoint wraps each payload in
``CHECKPOINT_WRAPPING`` levels, so the child fails a task whose result (or a workflow
whose output) nests deeper than ``payload_levels(max_json_depth)``, naming it, before
it sends the checkpoint the server would refuse (docs/attempts.md).
"""

from __future__ import annotations

import json
import re
from typing import Any

#: What the log stores in place of a payload the execution row holds.
INPUT_REF = {"$flux": "input"}
OUTPUT_REF = {"$flux": "output"}


class PayloadRefused(ValueError):
    """A payload the server would refuse: failing again gives the same refusal, so a
    task that produced one is not retried."""


class PayloadTooLarge(PayloadRefused):
    def __init__(self, what: str, size: int, limit: int):
        self.what, self.size, self.limit = what, size, limit
        super().__init__(
            f"{what} is {_mib(size)} of JSON, over the payload limit of {_mib(limit)} (the server's --max-payload-size)"
        )


def _mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB" if n >= 1024**2 else f"{n} bytes"


def encoded(value: Any) -> str:
    """The JSON text of ``value`` (TypeError/ValueError when it has none)."""
    return json.dumps(value, separators=(",", ":"))


def check_size(text: str, limit: int | None, what: str) -> None:
    """Raise ``PayloadTooLarge`` when the encoded ``text`` is over ``limit`` (None: no limit)."""
    if limit:
        size = len(text.encode()) if not text.isascii() else len(text)
        if size > limit:
            raise PayloadTooLarge(what, size, limit)


#: Levels a checkpoint's body puts around a payload: the body, its ``events``, the event.
CHECKPOINT_WRAPPING = 3


class PayloadTooDeep(PayloadRefused):
    def __init__(self, what: str, levels: int, limit: int):
        self.what, self.levels, self.limit = what, levels, limit
        super().__init__(
            f"{what} is nested {levels} levels; the limit is {limit} "
            f"(the server's --max-json-depth, less the {CHECKPOINT_WRAPPING} levels of the checkpoint that carries it)"
        )


def payload_levels(max_json_depth: int | None, wrapping: int = CHECKPOINT_WRAPPING) -> int | None:
    """The most levels of containers a payload may have when a request body holds it
    ``wrapping`` levels deep and may nest ``max_json_depth`` levels (None: no limit)."""
    return None if max_json_depth is None else max(0, max_json_depth - wrapping)


def levels(value: Any) -> int:
    """Levels of containers in a JSON value: a scalar 0, ``[]`` 1, ``{"a": [1]}`` 2
    (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in node if isinstance(child, (dict, list)))
    return deepest


def check_levels(text: str, value: Any, limit: int | None, what: str) -> None:
    """Raise ``PayloadTooDeep`` when ``value`` (whose JSON is ``text``) nests more than
    ``limit`` levels (None: no limit). Proven without a walk in the common case."""
    if limit is not None and not nests_within(text, limit):
        found = levels(value)
        if found > limit:
            raise PayloadTooDeep(what, found, limit)


#: A JSON string (in valid JSON a quote outside a string starts one). It also matches
#: an unterminated one, to the end of the text, so that no text makes it backtrack.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"[\[{][\]}]")


#: Brackets past which the proof is not tried (its passes cost up to ``max_depth``
#: times this): the text is parsed instead, as any large body is.
PROOF_BRACKETS = 16_384


def nests_within(text: str, max_depth: int) -> bool:
    """True when it is proven, without parsing, that no container in this JSON text is
    nested ``max_depth`` or more levels deep (the root is level 0); False: parse to know.

    Strings and everything but brackets are cut out, then each pass removes every
    innermost pair, so a text of ``k`` levels is empty after ``k`` passes. A text that
    is not JSON may get either answer: FastAPI refuses it anyway."""
    brackets = text.count("[") + text.count("{")
    if brackets <= max_depth:
        return True
    if 2 * brackets > PROOF_BRACKETS:  # too many to cut out cheaply (strings may hold some): parse
        return False
    skeleton = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if len(skeleton) > PROOF_BRACKETS:
        return False
    for _ in range(max_depth):
        skeleton, removed = _INNERMOST.subn("", skeleton)
        if not removed:
            break
    return not skeleton
