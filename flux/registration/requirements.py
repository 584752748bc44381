"""A bundle's declared requirements, as package constraints of its workflows.

Read from the bundle's root: ``requirements.txt``, else ``pyproject.toml``'s
``[project] dependencies``, else a wheel's ``*.dist-info/METADATA`` (``Requires-Dist``
without an ``extra`` marker). Each becomes ``name`` plus its version specifier: the
packages filter matches a worker's installed distributions by name and version, so
extras, URLs and environment markers (the worker's environment, not the server's)
are left out. A workflow's own ``packages=`` wins for a name it already lists.
"""

from __future__ import annotations

import tomllib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from flux.bundles.archive import Bundle
from flux.domain.resource_request import ResourceRequest, request_or_none
from flux.registration.static import StaticError


def declared_requirements(bundle: Bundle) -> list[str]:
    """The bundle's requirements (``[]`` when it declares none); ``StaticError`` names a bad one."""
    if "requirements.txt" in bundle.files:
        return _requirements_txt(bundle.text("requirements.txt") or "")
    if "pyproject.toml" in bundle.files:
        return _pyproject(bundle.text("pyproject.toml") or "")
    for name in sorted(bundle.files):
        parts = name.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
            return _metadata(name, bundle.text(name) or "")
    return []


def _constraint(text: str, filename: str, line: int | None) -> str | None:
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise StaticError(filename, line, f"invalid requirement {text!r}: {exc}") from None
    if requirement.marker is not None and "extra" in str(requirement.marker):
        return None  # an optional extra of the package, not a requirement of its workflows
    return f"{requirement.name}{requirement.specifier}"


def _requirements_txt(text: str) -> list[str]:
    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):  # comments, and pip options (-r, -e, --index-url)
            continue
        constraint = _constraint(line, "requirements.txt", number)
        if constraint:
            found.append(constraint)
    return found


def _pyproject(text: str) -> list[str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StaticError("pyproject.toml", None, f"is not valid TOML: {exc}") from None
    dependencies = (data.get("project") or {}).get("dependencies") or []
    if not isinstance(dependencies, list) or not all(isinstance(item, str) for item in dependencies):
        raise StaticError("pyproject.toml", None, "[project] dependencies must be a list of requirement strings")
    return [c for c in (_constraint(item, "pyproject.toml", None) for item in dependencies) if c]


def _metadata(filename: str, text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        if line.startswith("Requires-Dist:"):
            constraint = _constraint(line.split(":", 1)[1].strip(), filename, number)
            if constraint:
                found.append(constraint)
    return found


def with_requirements(request: ResourceRequest | None, requirements: list[str]) -> ResourceRequest | None:
    """``request`` with the bundle's requirements added to its packages (its own win by name)."""
    if not requirements:
        return request
    data = request.to_dict() if request else {}
    own = list(data.get("packages") or [])
    named = {canonicalize_name(Requirement(text).name) for text in own}
    added = [text for text in requirements if canonicalize_name(Requirement(text).name) not in named]
    return request_or_none({**data, "packages": own + added})
