"""Namespaces as values: the name every namespaced thing carries, and a namespace's
states (docs/namespaces.md).

A namespace's name follows the rule of every name users give (``flux.domain.names``):
it travels as a URL path segment (``/namespaces/NAME/...``). ``default`` always
exists, holds what was stored before namespaces, and cannot be deleted (as
Kubernetes' ``default``).
"""

from __future__ import annotations

from enum import StrEnum

from flux.domain.names import check_name

DEFAULT = "default"
#: The most namespaces one worker may be restricted to (``flux start worker --namespace``).
MAX_WORKER_NAMESPACES = 64
#: The client's environment variable (and ``[client] namespace``) naming its namespace.
NAMESPACE_ENV = "FLUX_NAMESPACE"


class NamespaceState(StrEnum):
    ACTIVE = "ACTIVE"
    #: Deleted with --force while executions in it had not finished: nothing new enters;
    #: it disappears, with everything in it, once they have all ended.
    TERMINATING = "TERMINATING"


def check_namespace(value: object) -> str:
    """``value`` if it is a valid namespace name, else ``ValueError`` saying what one may be."""
    return check_name(value, "namespace")


def worker_namespaces(values: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The namespaces a worker is restricted to, unique and sorted (empty: it serves every
    one), else ``ValueError``; the worker's flags and its registration share this rule."""
    names = tuple(sorted({check_namespace(value) for value in values}))
    if len(names) > MAX_WORKER_NAMESPACES:
        raise ValueError(f"a worker serves at most {MAX_WORKER_NAMESPACES} namespaces, not {len(names)}")
    return names
