"""Every workflow of a bundle, read statically, with the bundle's requirements."""

from __future__ import annotations

from dataclasses import dataclass, field

from flux.bundles.archive import Bundle
from flux.registration.migration import task_notes
from flux.registration.requirements import declared_requirements, with_requirements
from flux.registration.static import FoundWorkflow, StaticError, read_source


@dataclass
class BundleReading:
    workflows: list[FoundWorkflow]
    requirements: list[str]
    #: Per module file: its tasks' options whose meaning differs from flux-core's (``migration.task_notes``).
    notes: dict[str, list[str]] = field(default_factory=dict)


def module_name(path: str) -> str | None:
    """``pkg/flows.py`` -> ``pkg.flows``, ``pkg/__init__.py`` -> ``pkg``; None when the
    path cannot be imported (a directory like ``my-scripts`` or ``x.dist-info``)."""
    if not path.endswith(".py"):
        return None
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts)


def read_bundle(bundle: Bundle, requirements: bool = True) -> BundleReading:
    """The workflows of every importable module; ``StaticError`` for a module that cannot
    be read, a name defined twice, or a bundle without a workflow."""
    found: dict[str, FoundWorkflow] = {}
    notes: dict[str, list[str]] = {}
    modules = 0
    for path in sorted(bundle.files):
        module = module_name(path)
        if module is None:
            continue
        modules += 1
        reading = read_source(bundle.text(path) or "", path, module)
        notes[path] = task_notes(reading.tasks)
        for workflow in reading.workflows:
            first = found.get(workflow.options.name)
            if first is not None:
                raise StaticError(
                    workflow.filename,
                    workflow.line,
                    f"workflow {workflow.options.name!r} is defined twice (first at {first.filename}:{first.line})",
                )
            found[workflow.options.name] = workflow
    if not found:
        shown = ", ".join(sorted(p for p in bundle.files if module_name(p))[:3]) or "no Python module"
        raise StaticError(shown, None, f"no @workflow found ({modules} module(s) read)")
    declared = declared_requirements(bundle) if requirements else []
    return BundleReading(list(found.values()), declared, notes)


def stored_request(workflow: FoundWorkflow, reading: BundleReading):  # noqa: ANN201 - ResourceRequest | None
    """The workflow's request with the bundle's requirements merged into its packages."""
    return with_requirements(workflow.options.requests, reading.requirements)
