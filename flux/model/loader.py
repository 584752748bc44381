"""Turns what the server sent into ``Workflow`` objects, on the worker side only.

A bundle (docs/bundles.md) is imported from its unpacked folder, put first on the
import path, like any project: ``import helpers`` and relative imports work, and
``__file__`` points at real files. A child process runs one bundle version
(``flux.worker.runners.subprocess``), so two versions never share modules. A bare source
(the older ``POST /workflows`` API) gets a module of its own per distinct text.
Registration never comes here: it reads the source statically (``flux.registration``).
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

from flux.domain.sources import source_digest
from flux.model.calls import name_files_under
from flux.model.workflow import Workflow


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
        raise WorkflowLoadError(
            f"{filename} defines no workflow named {name!r} (found: {', '.join(sorted(workflows)) or 'none'})"
        )
    return workflows[name]


#: Bundle folders this process imported from (an in-process runner may see several).
_bundle_roots: list[Path] = []


def load_bundle_workflow(root: str, module: str, name: str) -> Workflow:
    """Import ``module`` from the unpacked bundle at ``root`` and return its workflow ``name``."""
    folder = Path(root).resolve()
    _make_room(folder, module.split(".")[0])
    name_files_under(root)  # a traceback says "train.py", not the worker's cache path
    if root not in sys.path:
        sys.path.insert(0, root)
        _bundle_roots.append(folder)
    try:
        imported = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import-time error is the user's to see
        raise WorkflowLoadError(f"{module} does not import: {type(exc).__name__}: {exc}") from exc
    found = {obj.name: obj for obj in vars(imported).values() if isinstance(obj, Workflow)}
    if name not in found:
        raise WorkflowLoadError(
            f"{module} defines no workflow named {name!r} (found: {', '.join(sorted(found)) or 'none'})"
        )
    return found[name]


def _make_room(folder: Path, top: str) -> None:
    """A top-level name already loaded from elsewhere: another bundle's modules give way
    (only an in-process runner ever sees two bundles), anything else is an error."""
    loaded = sys.modules.get(top)
    if loaded is None:
        return
    origin = Path(getattr(loaded, "__file__", None) or "/").resolve()
    if origin.is_relative_to(folder):
        return
    other = next((root for root in _bundle_roots if origin.is_relative_to(root)), None)
    if other is None:
        raise WorkflowLoadError(f"module {top!r} of the bundle is shadowed by {origin} already loaded; rename it")
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").resolve().is_relative_to(other):
            del sys.modules[name]
    sys.path[:] = [entry for entry in sys.path if Path(entry).resolve() != other]
    _bundle_roots.remove(other)
