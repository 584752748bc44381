"""Concurrency limits by key: at most ``limit`` executions with the same key hold a
worker at once (``Concurrency(key="customer:{input.customer_id}", limit=2)``).

The key is a template over the run's input, rendered by the server at submission
without running user code: literal text and ``{input}`` / ``{input.a.b}`` /
``{input.items.0}`` fields, nothing else (no format specs, no calls, no
attributes of objects). ``max_concurrency=N`` on a workflow is the same limit with
the workflow's name as the key. Keys are per namespace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

#: The longest key the server stores (a rendered template longer than this is refused).
MAX_KEY = 256
MAX_LIMIT = 1_000_000
_FIELD = re.compile(r"\{([^{}]*)\}")
_PATH = re.compile(r"^input(\.[A-Za-z0-9_-]+)*$")


class MissingField(ValueError):
    """The input has no value where the key's template reads one."""


def _fields(template: str, owner: str) -> list[str]:
    if not isinstance(template, str) or not template or len(template) > MAX_KEY:
        raise ValueError(
            f"{owner}: concurrency key must be a template string of 1 to {MAX_KEY} characters, got {template!r}"
        )
    fields = _FIELD.findall(template)
    if _FIELD.sub("", template).count("{") or _FIELD.sub("", template).count("}"):
        raise ValueError(f"{owner}: concurrency key {template!r} has an unmatched brace")
    for field in fields:
        if not _PATH.match(field):
            raise ValueError(
                f"{owner}: concurrency key field {{{field}}} must be {{input}} or {{input.name[.name...]}}"
                " (list items by index)"
            )
    return fields


@dataclass(frozen=True)
class Concurrency:
    key: str
    limit: int = 1

    def __post_init__(self) -> None:
        check_concurrency(self, "Concurrency")

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "limit": self.limit}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Concurrency | None":
        return None if not data else cls(str(data["key"]), int(data["limit"]))

    def render(self, input: Any) -> str:
        """The key for one run's input; ``MissingField`` names the field the input lacks."""

        def value(match: re.Match) -> str:
            found: Any = input
            for part in match.group(1).split(".")[1:]:
                if isinstance(found, Mapping) and part in found:
                    found = found[part]
                elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                    found = found[int(part)]
                else:
                    raise MissingField(
                        f"the concurrency key {self.key!r} reads {{{match.group(1)}}}, which the input does not have"
                    )
            return found if isinstance(found, str) else json.dumps(found, sort_keys=True, separators=(",", ":"))

        key = _FIELD.sub(value, self.key)
        if len(key) > MAX_KEY:
            raise MissingField(f"the concurrency key rendered from {self.key!r} is longer than {MAX_KEY} characters")
        return key


def check_concurrency(value: object, owner: str) -> Concurrency | None:
    """``None`` or a valid ``Concurrency`` (also from its JSON form); ``ValueError`` names the owner."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        if set(value) - {"key", "limit"} or "key" not in value:
            raise ValueError(f"{owner}: concurrency must be Concurrency(key=..., limit=...), got {value!r}")
        return Concurrency(value["key"], value.get("limit", 1))
    if not isinstance(value, Concurrency):
        raise ValueError(f"{owner}: concurrency must be Concurrency(key=..., limit=...), got {value!r}")
    _fields(value.key, owner)
    check_limit(value.limit, f"{owner}: concurrency limit")
    return value


def check_limit(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"{what} must be an int from 1 to {MAX_LIMIT}, got {value!r}")
    return value
