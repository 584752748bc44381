"""Bundles on the server: stored once per sha256, read back for workers.

A bundle up to ``bundle_inline_size`` is kept in its database row (one backup holds
everything); a larger one in ``bundle_dir/<sha256>.zip``, written to a temporary name
and renamed, so a reader never sees half a file (replicas must share the folder).
Past ``max_bundle_size`` an upload is refused with 413. The server only reads a
bundle: checks its entries (``flux.bundles.archive``) and its modules' source
(``flux.registration``); it never imports them.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from sqlalchemy.orm import Session

from flux.bundles.archive import Bundle, BundleError, bundle_digest, open_bundle
from flux.server.errors import Invalid, NotFound, TooLarge
from flux.server.models import BundleModel
from flux.server.schemas import BundleInfo
from flux.server.settings import ServerSettings

#: A bundle may unpack to this many times its zipped size (a zip bomb is refused).
UNPACK_RATIO = 4
_SHA256 = frozenset("0123456789abcdef")


def check(data: bytes, settings: ServerSettings) -> Bundle:
    """The checked bundle, or 413 (too large) / 422 (not a zip, zip-slip: the entry named)."""
    if len(data) > settings.max_bundle_size:
        raise TooLarge(
            f"the bundle is {len(data)} bytes,"
            f" more than the server's limit of {settings.max_bundle_size} (--max-bundle-size)"
        )
    try:
        return open_bundle(data, max_unpacked=max(settings.max_bundle_size * UNPACK_RATIO, 1))
    except BundleError as exc:
        raise Invalid(str(exc)) from None


def store(session: Session, bundle: Bundle, data: bytes, settings: ServerSettings) -> BundleInfo:
    """Keep the bundle (once: the same bytes are stored once)."""
    if session.get(BundleModel, bundle.sha256) is None:
        inline = len(data) <= settings.bundle_inline_size
        if not inline:
            _write_blob(settings.bundle_dir, bundle.sha256, data)
        session.add(
            BundleModel(sha256=bundle.sha256, size=len(data), data=data if inline else None, created_at=time.time())
        )
        session.flush()
    return BundleInfo(sha256=bundle.sha256, size=len(data), files=len(bundle.files))


def _write_blob(folder: Path, sha256: str, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = folder / f"{sha256}.zip"
    if target.exists():
        return
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".upload-")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(temporary, target)


def load(session: Session, sha256: str, settings: ServerSettings) -> bytes:
    """The bundle's bytes (404 if unknown), verified against its name."""
    if len(sha256) != 64 or not set(sha256) <= _SHA256:
        raise NotFound(f"bundle {sha256[:80]!r} is not stored (a bundle is named by its sha256, 64 hex digits)")
    row = session.get(BundleModel, sha256)
    if row is None:
        raise NotFound(f"bundle {sha256} is not stored")
    data = row.data
    if data is None:
        try:
            data = (settings.bundle_dir / f"{sha256}.zip").read_bytes()
        except FileNotFoundError:
            raise NotFound(f"bundle {sha256} is missing from {settings.bundle_dir}") from None
    if bundle_digest(data) != sha256:
        raise NotFound(f"bundle {sha256} is damaged in storage (its sha256 differs)")
    return data
