"""The client side's SDK: ``FluxClient`` over the HTTP API (``sdk``), its errors
(``errors``) and following an execution's events and lines (``streams``)."""

from flux.client.errors import FluxClientError, FluxConnectionError
from flux.client.sdk import DEFAULT_SERVER_URL, MAX_CANDIDATES, FluxClient, split_version, tls_verify
from flux.client.streams import SSEMessage, parse_sse

__all__ = [
    "DEFAULT_SERVER_URL",
    "MAX_CANDIDATES",
    "FluxClient",
    "FluxClientError",
    "FluxConnectionError",
    "SSEMessage",
    "parse_sse",
    "split_version",
    "tls_verify",
]
