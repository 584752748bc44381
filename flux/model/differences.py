"""The ``MigrationWarning``: a flux-core construct that runs here with another meaning,
said once per process, naming the construct and the guide (docs/migrating-from-flux-core.md).
Apart from ``flux.model.fluxcore`` so the runtime's own modules (the codecs) can warn too."""

from __future__ import annotations

import os
import warnings

GUIDE = "docs/migrating-from-flux-core.md"


class MigrationWarning(UserWarning):
    """A flux-core construct that runs here with another meaning: the warning names it
    and the section of the guide that says what changes (filter it by this category)."""


_warned: set[str] = set()


def differs(construct: str, meaning: str) -> None:
    """Warn once per process that ``construct`` keeps this engine's meaning, not flux-core's."""
    if construct in _warned:
        return
    _warned.add(construct)
    warnings.warn(f"{construct}: {meaning} (see {GUIDE})", MigrationWarning, stacklevel=4)


def pickled(kind: str, env: str) -> None:
    """A value JSON lacks was pickled (``flux.model.codecs``): fine in a local run, opt-in on a
    worker; said once, where the worker did not opt in itself (``env`` names the codecs it enables)."""
    if "pickle" not in os.environ.get(env, ""):
        differs(
            "a result that is not JSON",
            f"a {kind} is recorded pickled (codec 'pickle'): a local run enables it; on a server "
            f"its worker needs {env}=pickle, and only that fleet can read it",
        )
