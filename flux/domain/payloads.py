"""Payloads: an execution's input, each task's result and the workflow's output.

Each is one JSON value, stored once (events that carry it hold a reference, resolved
when the log is read), and none may be larger, JSON-encoded, than the server's
``max_payload_size``: the server refuses an input over it at submission, the child
fails a task whose result (or a workflow whose output) is over it, naming the limit,
the task and the size (docs/history.md). One rule, used on both sides.
"""

from __future__ import annotations

import json
from typing import Any

#: What the log stores in place of a payload the execution row holds.
INPUT_REF = {"$flux": "input"}
OUTPUT_REF = {"$flux": "output"}


class PayloadTooLarge(ValueError):
    def __init__(self, what: str, size: int, limit: int):
        self.what, self.size, self.limit = what, size, limit
        super().__init__(
            f"{what} is {_mib(size)} of JSON, over the payload limit of {_mib(limit)} "
            f"(the server's --max-payload-size)"
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
