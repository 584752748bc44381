"""Where a client finds its server, token and namespace: what the CLI reads, in the CLI's
order (docs/client.md#where-a-client-finds-its-server-token-and-namespace).

Each setting is the argument given, else its ``FLUX_*`` variable, else ``flux.toml``'s
``[client]`` key (``FLUX_CONFIG``, else ``./flux.toml``), else the default. The token
is ``api_token``, else the file ``api_token_file`` names, else ``FLUX_API_TOKEN_FILE``'s
file, else ``FLUX_API_TOKEN``, else ``[client] api_token_file``'s file: from one place,
the file wins, as the CLI's ``--api-token-file`` does. No namespace anywhere: ``None``,
and the client acts in its token's only namespace, else ``default``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flux.client.errors import FluxClientError
from flux.domain.namespaces import NAMESPACE_ENV, check_namespace

DEFAULT_SERVER_URL = "http://127.0.0.1:8000"
CONFIG_ENV = "FLUX_CONFIG"
#: The keys of ``[client]`` (``format`` is the CLI's alone).
CLIENT_KEYS = frozenset({"server_url", "namespace", "api_token_file", "format"})


def client_section(path: str | Path | None = None) -> dict[str, Any]:
    """``flux.toml``'s ``[client]`` table (``{}`` without a file); a key no client
    reads is refused, as the CLI refuses it."""
    file = Path(path or os.environ.get(CONFIG_ENV) or "flux.toml")
    if not file.is_file():
        return {}
    import tomllib  # only when there is a file: most processes have none

    try:
        section = tomllib.loads(file.read_text()).get("client") or {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FluxClientError(f"cannot read {file}: {exc}") from None
    unknown = sorted(set(section) - CLIENT_KEYS) if isinstance(section, dict) else ["(not a table)"]
    if unknown:
        raise FluxClientError(f"{file} [client]: unknown setting(s) {', '.join(unknown)}")
    return section


def read_token_file(path: str | Path) -> str:
    """A token kept in a file (a mounted secret): its text, stripped; never empty."""
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise FluxClientError(f"cannot read the API token from {path}: {exc.strerror}") from None
    if not token:
        raise FluxClientError(f"cannot read the API token from {path}: the file is empty")
    return token


@dataclass(frozen=True)
class ClientSettings:
    server_url: str
    api_token: str | None
    #: None: none was given anywhere (the token's only namespace, else default).
    namespace: str | None

    @classmethod
    def resolve(
        cls,
        server_url: str | None = None,
        api_token: str | None = None,
        namespace: str | None = None,
        api_token_file: str | Path | None = None,
        read_config: bool = True,
    ) -> "ClientSettings":
        """Each setting from the argument, the environment, then ``flux.toml`` (unless
        ``read_config`` is False: the CLI has read its own ``--config`` already)."""
        section = client_section() if read_config else {}
        env = os.environ
        namespace = namespace or env.get(NAMESPACE_ENV) or section.get("namespace")
        try:
            namespace = check_namespace(namespace) if namespace else None
        except ValueError as exc:
            raise FluxClientError(str(exc)) from None
        return cls(
            server_url=server_url or env.get("FLUX_SERVER_URL") or section.get("server_url") or DEFAULT_SERVER_URL,
            api_token=_token(api_token, api_token_file, section.get("api_token_file")),
            namespace=namespace,
        )


def _token(given: str | None, given_file: str | Path | None, config_file: str | None) -> str | None:
    if given:
        return given
    file = given_file or os.environ.get("FLUX_API_TOKEN_FILE")
    if file:
        return read_token_file(file)
    return os.environ.get("FLUX_API_TOKEN") or (read_token_file(config_file) if config_file else None)
