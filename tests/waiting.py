"""Polling helper for integration tests: wait for a condition with a deadline, never forever."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def eventually(condition: Callable[[], T], timeout: float = 30.0, message: str = "condition never held") -> T:
    """Return the first truthy value of ``condition()``, polling every 50 ms until ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(message)


#: The states an execution ends in (what ``ended`` waits for).
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")


def ended(client, execution_id: str, timeout: float = 90.0) -> dict:  # noqa: ANN001 - a FluxClient
    """The execution once it has ended (any of ``ENDED``), read through ``client``."""
    return eventually(
        lambda: (e := client.execution(execution_id))["state"] in ENDED and e, timeout, f"{execution_id} never ended"
    )


def steady(read: Callable[[], T], period: float = 1.5, timeout: float = 60.0, message: str = "never steady") -> T:
    """``read()`` once two reads ``period`` apart agree: whatever the last action set going
    (a round, a scan, a batch written later) is over, however late a loaded machine runs it."""

    def settled() -> tuple[T] | None:
        before = read()
        time.sleep(period)
        return (before,) if read() == before else None

    return eventually(settled, timeout=timeout, message=message)[0]
