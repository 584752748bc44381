"""Every workflow of a bundle, read statically, with the bundle's requirements."""

from __future__ import annotations

from dataclasses import dataclass

from flux.bundles.archive import Bundle
from flux.registration.requirements import declared_requirements, with_requirements
from flux.registration.static import FoundWorkflow, StaticError, read_source


@dataclass
class BundleReading:
    workflows: list[FoundWorkflow]
    requirements: list[str]


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
    modules = 0
    for path in sorted(bundle.files):
        module = module_name(path)
        if module is None:
            continue
        modules += 1
        for workflow in read_source(bundle.text(path) or "", path, module).workflows:
            first = found.get(workflow.options.name)
            if first is not None:
                raise StaticError(
                    workflow.filename, workflow.line,
                    f"workflow {workflow.options.name!r} is defined twice (first at {first.filename}:{first.line})",
                )
            found[workflow.options.name] = workflow
    if not found:
        shown = ", ".join(sorted(p for p in bundle.files if module_name(p))[:3]) or "no Python module"
        raise StaticError(shown, None, f"no @workflow found ({modules} module(s) read)")
    declared = declared_requirements(bundle) if requirements else []
    return BundleReading(list(found.values()), declared)


def stored_request(workflow: FoundWorkflow, reading: BundleReading):  # noqa: ANN201 - ResourceRequest | None
    """The workflow's request with the bundle's requirements merged into its packages."""
    return with_requirements(workflow.options.requests, reading.requirements)
