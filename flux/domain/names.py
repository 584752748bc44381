"""The one rule for names users give things (workflows; later schedules).

The ``@workflow`` decorator and the server's schemas both call ``check_name``, so a
name the client accepts is one the server accepts. Names travel in URL paths: the
rule keeps them to characters that need no quoting except nothing starting with
``.`` (``..`` would walk a path); the client quotes every segment all the same.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

NAME_MAX = 128
NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)


def check_name(value: Any, kind: str = "workflow") -> str:
    """``value`` if it is a valid name, else ``ValueError`` saying what a name may be."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(
            f"{kind} name {reprlib.repr(value)} must be 1 to {NAME_MAX} letters, digits, '_', '-' or '.',"
            " not starting with '.'"
        )
    return value
