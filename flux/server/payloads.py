"""Payloads on the server: the input's size at submission, and each payload stored once.

The execution row holds the input and the output; the log's WORKFLOW_SCHEDULED and
WORKFLOW_COMPLETED events hold a reference to them (``flux.domain.payloads``) that
``resolve`` turns back into the value when the log is read, so the API shows each
event with its payload while the database keeps one copy (docs/history.md).
"""

from __future__ import annotations

from typing import Any

from flux.domain.events import EventType
from flux.domain.payloads import INPUT_REF, OUTPUT_REF, PayloadTooLarge, check_size, encoded
from flux.server.errors import Invalid, TooLarge


def check_input(value: Any, limit: int) -> None:
    """413 for an input over the payload limit, before anything is stored."""
    try:
        check_size(encoded(value), limit, "the input")
    except PayloadTooLarge as exc:
        raise TooLarge(str(exc)) from None
    except (TypeError, ValueError) as exc:  # pragma: no cover - the body was JSON already
        raise Invalid(f"input: {exc}") from None


#: The value an event of this type stores instead of the payload the row holds.
STORED = {EventType.WORKFLOW_SCHEDULED.value: {"input": INPUT_REF}, EventType.WORKFLOW_COMPLETED.value: OUTPUT_REF}


def resolve(event_type: str, value: Any, execution: Any) -> Any:
    """The value to show for a stored event value: references become the payloads."""
    if event_type in STORED and value == STORED[event_type]:  # not a None value of another type
        return (
            {"input": readable(execution.input)}
            if event_type == EventType.WORKFLOW_SCHEDULED.value
            else readable(execution.output)
        )
    return readable(value)


#: Deeper than this a stored value cannot be answered (pydantic's serializer stops at 255).
READABLE_DEPTH = 200


def readable(value: Any) -> Any:
    """``value``, or a note in its place when it is nested too deep to be answered: values
    stored before the edge refused such input (``max_json_depth``) must not make a read 500."""
    if not isinstance(value, (dict, list)):
        return value
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > READABLE_DEPTH:
            return {"$flux": "unreadable", "reason": f"a stored value nested deeper than {READABLE_DEPTH} levels"}
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return value
