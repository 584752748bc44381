"""Building a bundle on the client from what ``flux workflow register PATH`` names.

* a ``.py`` file: a bundle of that one file;
* a directory: the import root, every file below it but those ignored by
  ``.gitignore`` files (git's rules, through ``pathspec``), a ``.fluxignore`` at the
  root (same syntax) and ``.git/``, ``__pycache__/``, ``*.pyc``; a symbolic link is
  followed when its target lies inside the directory and refused when it leaves it;
* a ``.zip`` or ``.whl``: sent as it is (the server checks its entries).

The zip is deterministic (sorted entries, fixed timestamps and modes), so the same
content always has the same sha256 and registering it again changes nothing.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from pathlib import Path

import pathspec

from flux.bundles.archive import BundleError

ALWAYS_IGNORED = [".git/", "__pycache__/", "*.pyc", ".fluxignore"]
IGNORE_FILES = (".gitignore",)
#: Timestamp of every entry (the earliest a zip can hold): content alone names a bundle.
EPOCH = (1980, 1, 1, 0, 0, 0)
ARCHIVES = (".zip", ".whl")


def build_bundle(path: str | Path) -> bytes:
    """The bundle's bytes for a file, a directory or an archive."""
    path = Path(path)
    if path.is_dir():
        return pack(directory_files(path))
    if not path.is_file():
        raise BundleError(f"cannot read {path}: No such file or directory")
    if path.suffix in ARCHIVES:
        return path.read_bytes()
    if path.suffix != ".py":
        raise BundleError(f"{path}: register a .py file, a directory, or a .zip/.whl archive")
    return pack({module_file_name(path.name): path.read_bytes()})


def module_file_name(name: str) -> str:
    """``my-flow.py`` -> ``my_flow.py``: a single file is imported by its name on the worker."""
    stem = re.sub(r"\W", "_", name[: -len(".py")]) or "workflow"
    return ("_" + stem if stem[0].isdigit() else stem) + ".py"


def pack(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    return buffer.getvalue()


def _spec(lines: list[str]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(lines)


def directory_files(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` that is not ignored, by its path relative to it."""
    root = root.resolve()
    fluxignore = root / ".fluxignore"
    rules = [(Path(), _spec(ALWAYS_IGNORED + (fluxignore.read_text().splitlines() if fluxignore.is_file() else [])))]
    files: dict[str, bytes] = {}
    _walk(root, root, Path(), rules, files, {root})
    return files


def _ignored(shown: Path, is_dir: bool, rules: list[tuple[Path, pathspec.PathSpec]]) -> bool:
    """Git's rule: each ignore file speaks of the paths below its own directory."""
    for base, spec in rules:
        if spec.match_file(shown.relative_to(base).as_posix() + ("/" if is_dir else "")):
            return True
    return False


def _walk(root: Path, directory: Path, at: Path, rules: list, files: dict[str, bytes], seen: set[Path]) -> None:
    """``directory`` (a real path) appears in the bundle at ``at``; ``rules``: (the
    directory of an ignore file, in the bundle; its patterns)."""
    for name in IGNORE_FILES:
        ignore = directory / name
        if ignore.is_file():
            rules = [*rules, (at, _spec(ignore.read_text().splitlines()))]
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        shown = at / entry.name
        real = Path(entry.path)
        if entry.is_symlink():
            real = real.resolve()
            if real != root and root not in real.parents:
                raise BundleError(f"{root / shown}: symbolic link to {real} leaves the bundle's directory; refused")
        is_dir = real.is_dir()
        if _ignored(shown, is_dir, rules):
            continue
        if is_dir:
            if real in seen:
                continue  # a link back up the tree
            _walk(root, real, shown, rules, files, seen | {real})
        elif real.is_file():
            files[shown.as_posix()] = real.read_bytes()
