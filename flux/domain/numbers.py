"""The one definition of "a number" for validation: int or float, never bool; the
largest integer a database column holds; and bytes as people read them."""

from __future__ import annotations

from typing import Any


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: Integers the server accepts fit a signed 64-bit column: |n| <= INT64_MAX.
INT64_MAX = 2**63 - 1


def human_size(n: float) -> str:
    """Bytes for people: 1.5 GiB (the CLI's and the console's)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover
