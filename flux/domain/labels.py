"""Limits on what affinity and routing say about worker labels, as Kubernetes sets
them for label selectors (docs/security.md, "Limits in the domain").

A label key is an optional prefix (a DNS subdomain, at most 253 characters) and a
``/``, then a name of at most 63 characters; a value is at most 63 characters. Only
the lengths are enforced: labels are compared as strings, so any characters match.
An affinity or a routing policy has at most ``MAX_TERMS`` terms, and an ``In`` or
``NotIn`` at most ``MAX_VALUES`` values: each costs the dispatcher work on every
run (10,000 affinity labels once cost 0.7 s of server CPU per run).
"""

from __future__ import annotations

#: Terms of one affinity, or of one routing policy.
MAX_TERMS = 64
#: Values of one ``In`` / ``NotIn``.
MAX_VALUES = 64
#: The name of a label key (after the last ``/``), and a label value.
MAX_NAME = 63
#: The prefix of a label key (before the last ``/``).
MAX_PREFIX = 253


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


def key_problem(key: str) -> str | None:
    """What is wrong with a label key's length, or None."""
    prefix, _, name = key.rpartition("/")
    if len(name) > MAX_NAME:
        return f"label key {_shown(key)} has a name of {len(name)} characters, at most {MAX_NAME}"
    if len(prefix) > MAX_PREFIX:
        return f"label key {_shown(key)} has a prefix of {len(prefix)} characters, at most {MAX_PREFIX}"
    return None


def value_problem(value: str) -> str | None:
    """What is wrong with a label value's length, or None."""
    if len(value) > MAX_NAME:
        return f"label value {_shown(value)} has {len(value)} characters, at most {MAX_NAME}"
    return None


def count_problem(count: int, what: str, most: int = MAX_TERMS) -> str | None:
    """``what`` has ``count`` entries: too many?"""
    return f"{what} has {count} entries, at most {most}" if count > most else None
