"""Turns workflow source text into ``Workflow`` objects.

Used by ``flux workflow register`` (to read a file's workflows before upload) and by
the runners (to execute what the server sent). Each source gets its own module so
two versions of one workflow never share globals.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from flux.domain.sources import source_digest
from flux.workflow import Workflow


class WorkflowLoadError(Exception):
    """The source does not import, or does not define the workflow asked for."""


_loaded: dict[str, dict[str, Workflow]] = {}


def load_workflows(source: str, filename: str = "<workflow>") -> dict[str, Workflow]:
    """Execute ``source`` as a fresh module (once per distinct source) and return its workflows."""
    digest = source_digest(source)
    if digest in _loaded:
        return _loaded[digest]
    module_name = f"flux_user_{digest[:16]}"
    module = types.ModuleType(module_name)
    module.__file__ = filename
    sys.modules[module_name] = module  # dataclasses, pickle and inspect look modules up here
    try:
        code = compile(source, filename, "exec")
        exec(code, module.__dict__)
    except Exception as exc:  # noqa: BLE001 - any import-time error is the user's to see
        sys.modules.pop(module_name, None)
        raise WorkflowLoadError(f"{filename} does not import: {type(exc).__name__}: {exc}") from exc
    _loaded[digest] = {obj.name: obj for obj in vars(module).values() if isinstance(obj, Workflow)}
    return _loaded[digest]


def load_workflow(source: str, name: str, filename: str = "<workflow>") -> Workflow:
    workflows = load_workflows(source, filename)
    if name not in workflows:
        raise WorkflowLoadError(f"{filename} defines no workflow named {name!r} (found: {', '.join(sorted(workflows)) or 'none'})")
    return workflows[name]


def import_object(spec: str) -> Any:
    """``package.module:attribute`` to the object (metrics providers, NVML bindings)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{spec!r} must look like 'module:attribute'")
    return getattr(importlib.import_module(module_name), attribute)
