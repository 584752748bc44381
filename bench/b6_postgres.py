"""B6: B1 and B2 against PostgreSQL.

To keep the figures clean and leave the shared database alone (the test suite uses
it, and a second server on the same tables would dispatch to its workers), the
benchmark creates a scratch database next to the one in the URL, runs there, and
drops it afterwards. If it may not create databases it says so and uses the URL as
given. Anything that stops the server from starting skips B6 with the reason.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

from bench.common import Skipped
from flux.server.settings import redact_url


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@contextlib.contextmanager
def scratch_database(url: str) -> Iterator[tuple[str, str]]:
    """Yield (url to use, note). Raises Skipped when PostgreSQL cannot be reached at all."""
    try:
        import psycopg
    except ImportError as exc:
        raise Skipped(f"psycopg is not importable ({exc}); the server could not use PostgreSQL either") from None
    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        admin = psycopg.connect(plain, autocommit=True, connect_timeout=5)
    except Exception as exc:  # noqa: BLE001 - any connection failure is a reason to skip
        raise Skipped(f"PostgreSQL at {redact_url(url)} is unreachable: {str(exc).strip().splitlines()[0]}") from None
    name = f"flux_bench_{os.getpid()}_{int(time.time())}"
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # noqa: BLE001
        admin.close()
        yield (
            url,
            f"could not create a scratch database ({str(exc).strip().splitlines()[0]});"
            f" used {redact_url(url)} as given",
        )
        return
    try:
        yield _with_database(plain, name), f"scratch database {name} on {redact_url(url)}, dropped afterwards"
    finally:
        with contextlib.suppress(Exception):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
