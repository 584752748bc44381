"""Providers: one module each behind ``base.Provider`` (docs/autoscaling.md#providers)."""

from __future__ import annotations

from flux.server.autoscale.providers.base import Context, Provider


def provider(kind: str, context: Context) -> Provider:
    """The provider of this kind, imported when first used (kubernetes' client is large)."""
    if kind == "local":
        from flux.server.autoscale.providers.local import LocalProvider

        return LocalProvider(context)
    if kind == "kubernetes":
        from flux.server.autoscale.providers.kubernetes import KubernetesProvider

        return KubernetesProvider(context)
    from flux.server.autoscale.providers.command import CommandProvider

    return CommandProvider(context)
