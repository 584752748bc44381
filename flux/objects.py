"""``package.module:attribute`` specs to the objects they name: metrics providers, NVML
bindings, the command line's lazily loaded commands. Imports nothing else, so any
process may use it."""

from __future__ import annotations

import importlib
from typing import Any


def import_object(spec: str) -> Any:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{spec!r} must look like 'module:attribute'")
    return getattr(importlib.import_module(module_name), attribute)
