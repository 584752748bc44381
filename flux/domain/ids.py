"""Execution ids as people read them: prefixes long enough to tell apart, as git does.

An id is 32 hex digits; a table shows its first ``SHORT_ID`` (12, as the console does:
at a million executions two sharing 12 digits is a 1-in-500 event), longer where two
of the ids shown share those. Every command takes any unique prefix back
(``FluxClient.resolve_execution``); one that changes something wants at least
``MIN_ACTION_PREFIX`` digits, so that a slip of one key cannot cancel the wrong run.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Digits of an id a table shows at least (the console's ``id[:12]`` too).
SHORT_ID = 12
#: Digits a prefix needs where the command changes something (cancel, resume).
MIN_ACTION_PREFIX = 4


def unique_prefixes(ids: Iterable[str], least: int = SHORT_ID) -> dict[str, str]:
    """Each id's shortest prefix of at least ``least`` characters that no other id of
    ``ids`` starts with (the whole id where one id begins another)."""
    distinct = sorted(set(ids))
    shown: dict[str, str] = {}
    for i, one in enumerate(distinct):
        # in sorted order the ids sharing the longest prefix with this one are its neighbours
        shared = max(
            (_common(one, distinct[j]) for j in (i - 1, i + 1) if 0 <= j < len(distinct)),
            default=0,
        )
        shown[one] = one[: max(least, shared + 1)]
    return shown


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
