"""The dependency policy (docs/production.md#dependencies): constraints.txt pins a set
that pyproject.toml admits, one version of each distribution it names."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin (NAME==VERSION)"
            assert canonicalize_name(name) not in found, f"constraints.txt pins {name} twice"
            found[canonicalize_name(name)] = version
    return found


def test_constraints_pin_what_pyproject_admits():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    pinned = pins()
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"constraints.txt does not pin {requirement.name} (run scripts/constraints.py write)"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {requirement.name}=={pinned[name]}, outside pyproject.toml's {requirement}"
        )


def test_upper_bounds_say_why():
    """An upper bound is an exception (docs/production.md#dependencies): each has its reason beside it."""
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.strip().startswith('"') and "<" in line.split("#", 1)[0]:
            assert "#" in line, f"an upper bound without its reason: {line.strip()}"
