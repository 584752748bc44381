"""flux-core's ``flux.utils.to_json``: indented JSON of a run's result or any value with
one JSON form (datetimes, UUIDs, enums, as results are recorded here)."""

from __future__ import annotations

import json
from typing import Any

from flux.model.runtime import plain

__all__ = ["to_json"]


def _default(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else plain(value)


def to_json(value: Any) -> str:
    return json.dumps(value, indent=4, default=_default)
