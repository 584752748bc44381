"""The SDK's calls about who may do what and where (docs/security.md#roles,
docs/namespaces.md), mixed into ``FluxClient``: tokens, who a token is, the audit log,
and namespaces with their quotas and weights."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from flux.client.urls import segment


class AccessMethods:
    """Tokens, the audit log and namespaces: a part of ``FluxClient`` (it supplies
    ``_request``, ``_pages`` and ``namespace``)."""

    # tokens and the audit log (docs/security.md#roles)
    def create_token(
        self, name: str, role: str, namespaces: Iterable[str] | None = None, expires_in: float | None = None
    ) -> dict:
        """A token with ``role`` in ``namespaces`` (None: all); its secret is in ``["token"]``, this once."""
        body = {
            "name": name,
            "role": role,
            "namespaces": list(namespaces) if namespaces else None,
            "expires_in": expires_in,
        }
        return self._request("POST", "/tokens", json=body)

    def list_tokens(self) -> list[dict]:
        """Every token's name, role, namespaces and times (never a secret)."""
        return self._request("GET", "/tokens")

    def revoke_token(self, name: str) -> dict:
        return self._request("DELETE", f"/tokens/{segment(name)}")

    def whoami(self) -> dict:
        """The name, role and namespaces of this client's token."""
        return self._request("GET", "/whoami")

    def iter_audit(
        self,
        *,
        namespace: str | None = None,
        token: str | None = None,
        action: str | None = None,
        since: float | None = None,
        page_size: int = 1000,
    ) -> Iterator[dict]:
        """Audit rows, newest first, a page at a time; ``since``: Unix seconds."""
        params = {"namespace": namespace, "token": token, "action": action, "since": since, "limit": page_size}
        return self._pages("/audit", params)

    # --- namespaces (docs/namespaces.md) ---------------------------------------------------

    def create_namespace(self, name: str) -> dict:
        return self._request("POST", "/namespaces", json={"name": name})

    def list_namespaces(self) -> list[dict]:
        return self._request("GET", "/namespaces")

    def show_namespace(self, name: str | None = None) -> dict:
        """Its state and what it holds (this client's namespace by default)."""
        return self._request("GET", f"/namespaces/{segment(name or self.namespace)}")

    def update_namespace(self, name: str | None = None, **changes: Any) -> dict:
        """Its ``weight`` and ``quota`` (docs/contention.md): what is given changes. The
        quota is merged: ``quota={"gpu": 2, "cpu": None}`` sets gpu, removes cpu and keeps
        the other keys; ``quota=None`` removes the quota."""
        return self._request("PATCH", f"/namespaces/{segment(name or self.namespace)}", json=changes)

    def replace_quota(self, name: str | None, quota: dict[str, Any]) -> dict:
        """Its whole quota, replacing the one it had (``{}`` removes it)."""
        return self._request("PUT", f"/namespaces/{segment(name or self.namespace)}/quota", json={"quota": quota})

    def delete_namespace(self, name: str, force: bool = False) -> dict:
        """Delete it with everything in it: refused while executions in it have not
        finished, unless ``force`` (they are cancelled; it goes once they have ended)."""
        return self._request("DELETE", f"/namespaces/{segment(name)}", params={"force": "true"} if force else None)
