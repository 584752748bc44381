"""flux-core's ``SecretManager``: secrets saved here reach the tasks of a local
``Workflow.run`` in this process. On a server, secrets are set with ``flux secret set``
(stored encrypted, handed only to the attempt that asks: docs/security.md)."""

from __future__ import annotations

from typing import Any

from flux.model.fluxcore import LOCAL_SECRETS

__all__ = ["SecretManager"]


class SecretManager:
    """This process's secrets for local runs, under flux-core's method names."""

    @staticmethod
    def current() -> "SecretManager":
        return SecretManager()

    def save(self, name: str, value: Any) -> None:
        LOCAL_SECRETS[name] = str(value)

    def remove(self, name: str) -> None:
        LOCAL_SECRETS.pop(name, None)

    async def get(self, secret_requests: list[str]) -> dict[str, str]:
        return self.get_sync(secret_requests)

    def get_sync(self, secret_requests: list[str]) -> dict[str, str]:
        missing = [name for name in secret_requests if name not in LOCAL_SECRETS]
        if missing:
            raise ValueError(f"secret(s) not found: {', '.join(missing)}")
        return {name: LOCAL_SECRETS[name] for name in secret_requests}

    def all(self) -> list[str]:
        return sorted(LOCAL_SECRETS)
