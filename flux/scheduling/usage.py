"""Fair share that remembers: each namespace's decayed usage (pure, no I/O).

Slurm's ``PriorityDecayHalfLife``: what a namespace held, in resource-seconds of every
dimension divided by the fleet's size in that dimension (so one whole fleet for one
second is 1.0 in each dimension it used), decays by half every ``half_life`` seconds.
Held at a constant fraction ``f`` for ever, a dimension's usage tends to ``f * tau``
(``tau = half_life / ln 2``, the mean life), so ``usage / tau`` is the share of the
fleet a namespace held over the recent past: fair share adds its largest dimension
(the decayed dominant usage) to what the namespace holds now (``FairShare.past``).
A half-life of 0 keeps no past: instantaneous DRF.
"""

from __future__ import annotations

import math
from typing import Mapping


def decayed(usage: Mapping[str, float], elapsed: float, half_life: float) -> dict[str, float]:
    """``usage`` after ``elapsed`` seconds of decay (nothing held meanwhile)."""
    if half_life <= 0:
        return {}
    factor = 0.5 ** (max(0.0, elapsed) / half_life)
    return {name: amount * factor for name, amount in usage.items() if amount * factor > 1e-9}


def accrued(
    usage: Mapping[str, float],
    held: Mapping[str, float],
    capacity: Mapping[str, float],
    elapsed: float,
    half_life: float,
    held_for: float | None = None,
) -> dict[str, float]:
    """``usage`` after ``elapsed`` seconds, ``held`` held in the last ``held_for`` of them
    (all of them by default), decaying as it accrues (the exact integral of a constant
    rate: ``f * tau * (1 - 2^(-t/h))``)."""
    if half_life <= 0:
        return {}
    tau = half_life / math.log(2)
    held_for = elapsed if held_for is None else min(held_for, elapsed)
    gained = tau * (1 - 0.5 ** (max(0.0, held_for) / half_life))
    after = dict(decayed(usage, elapsed, half_life))
    for name, amount in held.items():
        total = capacity.get(name, 0)
        if total > 0 and amount > 0:
            after[name] = after.get(name, 0.0) + amount / total * gained
    return after


def dominant(usage: Mapping[str, float], half_life: float) -> float:
    """The decayed dominant usage as a share of the fleet (``usage / tau`` in its largest dimension)."""
    if half_life <= 0 or not usage:
        return 0.0
    return max(usage.values()) / (half_life / math.log(2))
