"""Every PostgreSQL advisory lock the server takes, in one place, so two never share a key.

Each is a transaction-scoped lock (``pg_advisory_xact_lock`` and its ``try`` form): it ends
with the transaction that took it, so a replica killed mid-pass never leaves one behind.
SQLite has one writer at a time and takes none of these.
"""

from __future__ import annotations

from enum import IntEnum


class AdvisoryLock(IntEnum):
    """The key of each advisory lock: what a replica does alone while it holds it."""

    #: Alembic's upgrade at start-up: replicas starting together migrate one at a time.
    MIGRATIONS = 727072
    #: A placement round: one replica places at a time (flux/server/dispatch.py).
    PLACEMENT = 727073
    #: An autoscaling pass over the pools (flux/server/scaling.py).
    AUTOSCALE = 727075
