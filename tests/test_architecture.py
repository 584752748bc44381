"""The layer contracts of docs/architecture.md, as import-linter checks them
(``[tool.importlinter]`` in pyproject.toml): the pure core imports no I/O, the server
never imports the worker side nor the programming model, the worker never imports the
server, no cycles."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept():
    command = shutil.which("lint-imports") or f"{Path(sys.executable).parent}/lint-imports"
    result = subprocess.run([command, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "7 kept, 0 broken" in result.stdout


def test_no_two_test_modules_share_a_name():
    """Test folders are not packages: pytest imports each module by its basename, so a
    second ``test_x.py`` in another folder stops the whole run at collection."""
    names = sorted(path.name for path in (REPO / "tests").rglob("test_*.py"))
    assert sorted(set(names)) == names, [name for name in set(names) if names.count(name) > 1]
