"""What the client raises: one error type carrying the server's one-line reason (what the
CLI prints), and a subclass for a server that cannot be reached at all."""

from __future__ import annotations

import httpx


class FluxClientError(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class FluxConnectionError(FluxClientError):
    """The server could not be reached (refused, unknown host, timed out)."""


def reason(response: httpx.Response) -> str:
    """The server's ``detail`` (every error body has one; see docs/security.md)."""
    try:
        detail = response.json()["detail"]
    except (ValueError, TypeError, KeyError):
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return f"HTTP {response.status_code}: {detail}"


def error_from(response: httpx.Response) -> FluxClientError:
    return FluxClientError(reason(response), response.status_code)
