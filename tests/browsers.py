"""Where the browser tests find Chromium, and what a missing one means: a skip on a
developer's machine, a failure where `.ci/run` set ``FLUX_REQUIRE_BROWSER`` (a CI run
whose console tests silently skipped would prove nothing about the console)."""

from __future__ import annotations

import os

import pytest

#: Debian's Chromium: Playwright's own browser download is not reachable here.
CHROMIUM = "/usr/bin/chromium"


def require_chromium() -> None:
    """Skip the calling module without Chromium, or fail it where CI requires the browser."""
    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("FLUX_REQUIRE_BROWSER"):
        raise RuntimeError(f"{CHROMIUM} is missing and FLUX_REQUIRE_BROWSER is set (apt-get install -y chromium)")
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)
