"""The one definition of "a number" for validation: int or float, never bool; and
the largest integer a database column holds."""

from __future__ import annotations

from typing import Any


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: Integers the server accepts fit a signed 64-bit column: |n| <= INT64_MAX.
INT64_MAX = 2**63 - 1
