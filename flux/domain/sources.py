"""A workflow source's identity: the server stores a version per distinct digest, and
a worker loads each distinct source once. Pure, so the server need not import the
loader (which executes user code) to compute it."""

from __future__ import annotations

import hashlib


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()
