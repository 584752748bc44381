"""flux-core's import path of its routing policy language (``from flux.routing import
label, prefer, score``): ``flux.domain.fluxcore_routing``, which translates it, under
that name."""

from flux.domain import fluxcore_routing as _translation
from flux.domain.fluxcore_routing import *  # noqa: F403 - every name flux-core's users import
from flux.domain.fluxcore_routing import Condition, Selector, Unmapped

__all__ = ["Condition", "Selector", "Unmapped", *_translation.__all__]
