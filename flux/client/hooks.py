"""The SDK's webhook calls (docs/hooks.md), mixed into ``FluxClient``: hooks are
namespaced, like schedules, and managed by the same roles."""

from __future__ import annotations

from flux.client.urls import segment


class HookMethods:
    """The webhook half of ``FluxClient`` (it supplies ``_request`` and ``scoped``)."""

    def create_hook(
        self, name: str, url: str, events: list[str], *, workflow: str | None = None, secret: str | None = None
    ) -> dict:
        """Subscribe ``url`` to ``events``; without ``secret`` the server makes one and
        returns it (in ``secret``) this once."""
        body = {"name": name, "url": url, "events": list(events), "workflow": workflow, "secret": secret}
        return self._request("POST", self.scoped("/hooks"), json={k: v for k, v in body.items() if v is not None})

    def list_hooks(self) -> list[dict]:
        return self._request("GET", self.scoped("/hooks"))

    def show_hook(self, name: str) -> dict:
        return self._request("GET", self.scoped(f"/hooks/{segment(name)}"))

    def delete_hook(self, name: str) -> None:
        self._request("DELETE", self.scoped(f"/hooks/{segment(name)}"))

    def test_hook(self, name: str) -> dict:
        """A ``hook.test`` delivery to it; returns the delivery (follow it with ``hook_delivery``)."""
        return self._request("POST", self.scoped(f"/hooks/{segment(name)}/test"))

    def hook_deliveries(self, name: str) -> list[dict]:
        """Its newest deliveries, each with its attempts."""
        return self._request("GET", self.scoped(f"/hooks/{segment(name)}/deliveries"))

    def hook_delivery(self, name: str, delivery_id: str) -> dict:
        return self._request("GET", self.scoped(f"/hooks/{segment(name)}/deliveries/{segment(delivery_id)}"))

    def redeliver(self, name: str, delivery_id: str) -> dict:
        """Send a delivered or dead delivery again, under the same id."""
        return self._request("POST", self.scoped(f"/hooks/{segment(name)}/deliveries/{segment(delivery_id)}/redeliver"))
