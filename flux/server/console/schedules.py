"""Schedules appear in the console when the server has them: the nav entry, the page
and the executions filter all ask ``available()``, which looks for the module that
serves ``GET /schedules`` (``flux.server.schedules``). Isolated here so that wiring
them in is this file only."""

from __future__ import annotations

import functools
import importlib.util


@functools.cache
def available() -> bool:
    return importlib.util.find_spec("flux.server.schedules") is not None
