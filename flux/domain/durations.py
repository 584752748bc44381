"""Durations as people write them: ``30``, ``"30s"``, ``"5m"``, ``"1h30m"``, ``"30d"``."""

from __future__ import annotations

import math
import re

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


class InvalidDuration(ValueError):
    pass


def parse_duration(value: float | int | str, field: str = "duration") -> float:
    """Seconds (more than 0) from a number of seconds or a duration string."""
    if isinstance(value, bool):
        raise InvalidDuration(f"{field}: expected seconds or a duration such as '30s', '5m', '1h30m'")
    if isinstance(value, (int, float)):
        seconds = float(value) if isinstance(value, float) or abs(value) < 2**63 else math.inf
    else:
        text = str(value).strip().lower().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise InvalidDuration(
                    f"{field}: {value!r} is not a duration (e.g. '30s', '5m', '1h30m', '30d')"
                ) from None
            seconds = sum(float(n) * UNITS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidDuration(f"{field}: must be more than 0 seconds, not {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """Seconds as people write them, the inverse of ``parse_duration``: ``10s``,
    ``5m``, ``1h30m``, ``2d``; a fraction of a second as ``ms``."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    parts, rest = [], seconds
    for unit in ("d", "h", "m"):
        count, rest = divmod(rest, UNITS[unit])
        if count:
            parts.append(f"{count:.0f}{unit}")
    if rest or not parts:
        parts.append(f"{rest:g}s")
    return "".join(parts)
