"""The worker: probe, register, heartbeat, claim, run, report, drain.

Rooms: ``config`` (what it is told), ``session`` (its session with the server),
``heartbeat`` (what it publishes), ``claims`` (the claim loop), ``running`` (each
execution's attempt, outbox and checkpoints), ``drain`` (stopping without losing
work), ``lifecycle`` (the ``Worker`` that ties them together).

The worker side's probe (what a worker publishes), ``cgroups`` (its container's
limits) and ``identity`` (its name and session token on disk) live here too. Nothing is
imported with the package: a runner child that needs ``cgroups`` loads no session.
"""

import importlib

#: Each exported name and the module that defines it, imported on first use (PEP 562).
_EXPORTS = {
    "Worker": "lifecycle",
    "WorkerConfig": "config",
    "build_runner": "config",
    "Backoff": "session",
    "is_transient": "session",
    "retry_after": "session",
}


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = list(_EXPORTS)
