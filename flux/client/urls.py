"""URL parts the client builds: path segments and query parameters."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote


def given(params: dict[str, Any]) -> dict[str, Any]:
    """Query parameters that were given (None and empty are left out)."""
    return {k: v for k, v in params.items() if v is not None and v != ""}


def segment(value: str) -> str:
    """One URL path segment: a name with '?', '#' or '/' must not become another URL."""
    return quote(str(value), safe="")
