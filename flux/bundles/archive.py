"""A bundle: a zip of a workflow project, named by the sha256 of its bytes.

The server checks every archive it is sent (``open_bundle``) and the worker checks it
again when it unpacks (``extract``): an entry with ``..``, an absolute path, a drive,
a backslash or a symbolic link is refused with its name (zip-slip), so unpacking can
only write below the destination. Pure: no I/O but the bytes and the destination.
"""

from __future__ import annotations

import hashlib
import io
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


class BundleError(ValueError):
    """An archive that is not a usable bundle; the message names the entry."""


def bundle_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_entry_name(name: str) -> None:
    """Refuse names that would write outside the destination when unpacked."""
    path = PurePosixPath(name)
    if (
        not name
        or "\\" in name
        or "\x00" in name
        or path.is_absolute()
        or ".." in path.parts
        or (len(name) > 1 and name[1] == ":")
    ):
        raise BundleError(f"archive entry {name!r} is refused: it would be unpacked outside the bundle (zip-slip)")


@dataclass(frozen=True)
class Bundle:
    """A checked archive: its digest and its files (directories left out)."""

    sha256: str
    size: int
    files: dict[str, bytes]

    def text(self, name: str) -> str | None:
        data = self.files.get(name)
        return None if data is None else data.decode("utf-8", errors="replace")


def _entries(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    entries = []
    for info in archive.infolist():
        check_entry_name(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise BundleError(f"archive entry {info.filename!r} is refused: symbolic links are not unpacked")
        if not info.is_dir():
            entries.append(info)
    return entries


def open_bundle(data: bytes, max_unpacked: int | None = None) -> Bundle:
    """Check ``data`` and read its files; ``max_unpacked`` bounds the unpacked bytes
    (a zip bomb is refused before it is inflated)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise BundleError(f"not a zip archive (a bundle is a zip or a wheel): {exc}") from None
    with archive:
        entries = _entries(archive)
        unpacked = sum(info.file_size for info in entries)
        if max_unpacked is not None and unpacked > max_unpacked:
            raise BundleError(f"the bundle unpacks to {unpacked} bytes, more than the limit of {max_unpacked}")
        try:
            files = {info.filename: archive.read(info) for info in entries}
        except (zipfile.BadZipFile, RuntimeError, OSError, EOFError) as exc:
            raise BundleError(f"archive is damaged: {exc}") from None
    return Bundle(bundle_digest(data), len(data), files)


def extract(data: bytes, destination: Path) -> None:
    """Unpack a bundle below ``destination`` (checked again: the worker trusts no one)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in _entries(archive):
            target = destination.joinpath(*PurePosixPath(info.filename).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(info))
