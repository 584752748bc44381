"""constraints.txt: the exact set of distributions CI last passed with.

    python3 scripts/constraints.py write   # after a green run in a fresh venv: pin what is installed
    python3 scripts/constraints.py diff    # what this environment has that differs from the pins

Reproduce that set with ``pip install -e '.[dev]' -c constraints.txt``
(docs/production.md#dependencies). The editable project itself and the installers
(pip, setuptools) are not pinned.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

PATH = Path(__file__).resolve().parent.parent / "constraints.txt"
UNPINNED = {"flux-engine", "pip", "setuptools"}
HEADER = (
    "# The exact set CI last passed with on Python {python} (a fresh venv, `pip install -e '.[dev]'`).\n"
    "# Reproduce it: pip install -e '.[dev]' -c constraints.txt\n"
    "# Refresh it after a green run: python3 scripts/constraints.py write (docs/production.md#dependencies)\n"
)


def installed() -> dict[str, str]:
    found = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}
    return {name: version for name, version in sorted(found.items()) if name not in UNPINNED}


def pinned() -> dict[str, str]:
    pins = {}
    for line in PATH.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonicalize_name(name)] = version.strip()
    return pins


def write() -> int:
    python = ".".join(map(str, sys.version_info[:2]))
    body = "".join(f"{name}=={version}\n" for name, version in installed().items())
    PATH.write_text(HEADER.format(python=python) + body)
    print(f"wrote {PATH.name}: {body.count(chr(10))} pins")
    return 0


def diff() -> int:
    """Print each difference; exit 1 when there is one (CI prints it and goes on)."""
    now, pins = installed(), pinned()
    changes = [
        f"  {name}: {pins.get(name, '-')} -> {now.get(name, '-')}"
        for name in sorted(now.keys() | pins.keys())
        if now.get(name) != pins.get(name)
    ]
    print(f"constraints.txt: {len(changes) or 'no'} difference(s) from this environment" + (":" if changes else ""))
    if changes:
        print("\n".join(changes))
    return 1 if changes else 0


if __name__ == "__main__":
    commands = {"write": write, "diff": diff}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: {sys.argv[0]} write|diff")
    sys.exit(commands[sys.argv[1]]())
