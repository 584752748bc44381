"""The worker's bundle cache: each bundle fetched once, by hash, and kept unpacked.

``acquire(sha256)`` gives the folder of an unpacked bundle, fetching it on first use
(``GET /bundles/SHA256``), verifying that its bytes hash to its name, and unpacking it
to a temporary folder renamed into place (a half-unpacked bundle is never used; files
stay on disk, so ``__file__``-relative data files work). The cache is bounded in bytes:
past ``max_bytes`` the least recently used bundles not in use are removed. ``release``
ends a use. One folder per bundle is what isolates versions: a child runs one bundle
(``flux.worker.runners.subprocess``), with that folder first on its import path.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Awaitable, Callable

from flux.bundles.archive import BundleError, bundle_digest, extract

log = logging.getLogger("flux.worker")

#: The marker a bundle folder gets once unpacked completely; it also records its use.
READY = ".flux-bundle"


class BundleCache:
    def __init__(self, root: Path, max_bytes: int, fetch: Callable[[str], Awaitable[bytes]]):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.fetch = fetch
        self.in_use: Counter[str] = Counter()
        self._locks: dict[str, asyncio.Lock] = {}

    def folder(self, sha256: str) -> Path:
        return self.root / sha256

    async def acquire(self, sha256: str) -> Path:
        """The unpacked bundle's folder, kept while in use (``release``)."""
        self.in_use[sha256] += 1
        try:
            async with self._locks.setdefault(sha256, asyncio.Lock()):
                folder = self.folder(sha256)
                marker = folder / READY
                if marker.exists():
                    os.utime(marker)  # most recently used
                    return folder
                data = await self.fetch(f"/bundles/{sha256}")
                if bundle_digest(data) != sha256:
                    raise BundleError(f"bundle {sha256} from the server does not match its sha256; not used")
                await asyncio.to_thread(self._unpack, data, folder)
            await asyncio.to_thread(self.evict)
            return folder
        except BaseException:
            self.release(sha256)
            raise

    def release(self, sha256: str) -> None:
        self.in_use[sha256] -= 1
        if self.in_use[sha256] <= 0:
            del self.in_use[sha256]

    def _unpack(self, data: bytes, folder: Path) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = Path(tempfile.mkdtemp(dir=self.root, prefix=".unpacking-"))
        try:
            extract(data, staging)
            (staging / READY).write_text(f"{len(data)}\n")
            if folder.exists():  # left by a crash before its marker was written
                shutil.rmtree(folder)
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def evict(self) -> list[str]:
        """Remove least recently used bundles not in use until the cache fits; returns them."""
        entries = []
        for folder in self.root.iterdir() if self.root.exists() else ():
            marker = folder / READY
            if marker.exists():
                entries.append((marker.stat().st_mtime, folder.name, _size(folder)))
        total = sum(size for _, _, size in entries)
        removed = []
        for _, name, size in sorted(entries):
            if total <= self.max_bytes:
                break
            if name in self.in_use:
                continue
            shutil.rmtree(self.folder(name), ignore_errors=True)
            total -= size
            removed.append(name)
        if removed:
            log.info(
                "bundle cache over %d bytes: removed %d least recently used (%s)",
                self.max_bytes,
                len(removed),
                ", ".join(name[:12] for name in removed),
            )
        return removed


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def cache_root(cache_dir: str | None, home: str | None, name: str) -> Path:
    """``--bundle-cache-dir``, else HOME/bundle-cache/NAME, else a fresh temporary folder."""
    if cache_dir:
        return Path(cache_dir)
    if home:
        return Path(home) / "bundle-cache" / name
    return Path(tempfile.mkdtemp(prefix=f"flux-bundles-{name}-"))
