"""Durable waits: what ``sleep``, ``pause`` and ``call`` leave on the server while an
execution holds no worker, and the workflow ``timeout`` that bounds the whole of it.

A wait is a JSON dict recorded in WORKFLOW_SUSPENDED and on the execution row
(``wait``): ``{"kind": "sleep", "id": "sleep:1", "until": 1700000000.0}``,
``{"kind": "pause", "id": "pause:approval:1", "name": "approval", "payload": ...}``,
``{"kind": "call", "id": "call:1", "workflow": "child", "child": "<execution id>"}``.
See docs/waits.md.
"""

from __future__ import annotations

import hashlib
import math
import time
from enum import StrEnum

from flux.domain.events import ExecutionState
from flux.domain.numbers import is_number


class WaitKind(StrEnum):
    SLEEP = "sleep"
    PAUSE = "pause"
    CALL = "call"


#: The state an execution waits in, by the kind of its wait.
STATE_OF = {
    WaitKind.SLEEP: ExecutionState.SLEEPING,
    WaitKind.PAUSE: ExecutionState.PAUSED,
    WaitKind.CALL: ExecutionState.AWAITING_CHILD,
}
#: Sleeps shorter than this (seconds) sleep in place, holding the worker's slot.
DEFAULT_DURABLE_SLEEP_THRESHOLD = 30.0
THRESHOLD_ENV = "FLUX_DURABLE_SLEEP_THRESHOLD"


def check_timeout(value: object, owner: str) -> float | None:
    """A workflow's ``timeout``: ``None`` or seconds > 0; ``ValueError`` names the option."""
    if value is None:
        return None
    if not is_number(value) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: timeout must be a number of seconds > 0, got {value!r}")
    return float(value)


def child_id(parent_id: str, wait_id: str) -> str:
    """The id of the child a ``call`` starts: derived from its parent and the call's id,
    so a call submitted twice (a crash between submission and record) starts one child."""
    return hashlib.sha256(f"{parent_id}/{wait_id}".encode()).hexdigest()[:32]


def note(wait: dict) -> str:
    """One line for lists and ``placement_note``: what the execution waits for."""
    kind = wait.get("kind")
    if kind == WaitKind.SLEEP:
        return "sleeping until " + time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(wait["until"]))
    if kind == WaitKind.PAUSE:
        return f"paused: {wait.get('name')}"
    return f"waiting for child {wait.get('child')} ({wait.get('workflow')})"
