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
    """The server's ``detail`` (every error body has one; see docs/security.md). A web
    page instead (a URL of the console, a proxy's error page) is named, never printed."""
    try:
        detail = response.json()["detail"]
    except (ValueError, TypeError, KeyError):
        if "html" in response.headers.get("content-type", "") or response.text.lstrip()[:1] == "<":
            return f"HTTP {response.status_code}: {_not_the_api(response.request.url)}"
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return f"HTTP {response.status_code}: {detail}"


def _not_the_api(url: httpx.URL) -> str:
    """What to say of a web page where the API was expected, and the URL to use instead."""
    shown = url.copy_with(query=None)
    if "/ui/" not in url.path:
        return f"{shown} answered with a web page, not the Flux API: is the server URL right?"
    base = str(url.copy_with(path=url.path[: url.path.find("/ui/")] or "/", query=None)).rstrip("/")
    return f"{shown} is a page of the web console, not the Flux API: the server URL is {base} (without /ui)"


def error_from(response: httpx.Response) -> FluxClientError:
    return FluxClientError(reason(response), response.status_code)
