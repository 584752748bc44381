"""Fair share that remembers (docs/contention.md): decayed usage as properties and worked
examples, and the order fair share gives two namespaces once one held the fleet alone."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.scheduling.demand import Demand
from flux.scheduling.fairshare import FairShare, interleave
from flux.scheduling.holders import SLOTS
from flux.scheduling.usage import accrued, decayed, dominant

HOUR = 3600.0
TAU = HOUR / math.log(2)
FLEET = {SLOTS: 4.0, "cpu": 16.0}


def test_usage_halves_every_half_life_and_none_is_kept_without_one():
    assert decayed({"cpu": 8.0}, HOUR, HOUR) == {"cpu": pytest.approx(4.0)}
    assert decayed({"cpu": 8.0}, 3 * HOUR, HOUR) == {"cpu": pytest.approx(1.0)}
    assert decayed({"cpu": 8.0}, HOUR, 0) == {} and accrued({}, {"cpu": 16}, FLEET, HOUR, 0) == {}


@settings(max_examples=100, deadline=None)
@given(st.floats(0.05, 1.0), st.integers(1, 40), st.floats(1.0, 600.0))
def test_holding_a_share_for_ever_tends_to_that_share_and_steps_add_up(fraction, steps, step):
    """Accruing in steps is the same as at once (the integral is exact), and never passes the share held."""
    held = {"cpu": fraction * FLEET["cpu"]}
    usage: dict[str, float] = {}
    for _ in range(steps):
        usage = accrued(usage, held, FLEET, step, HOUR)
    at_once = accrued({}, held, FLEET, steps * step, HOUR)
    assert usage["cpu"] == pytest.approx(at_once["cpu"], rel=1e-6)
    assert dominant(usage, HOUR) <= fraction + 1e-9
    assert dominant(accrued({}, held, FLEET, 200 * HOUR, HOUR), HOUR) == pytest.approx(fraction, rel=1e-6)


def test_only_the_last_held_for_seconds_count_as_held():
    gained = accrued({}, {"cpu": 16.0}, FLEET, 3600, HOUR, held_for=10)
    assert gained["cpu"] == pytest.approx(TAU * (1 - 0.5 ** (10 / HOUR)))


def _demands(namespace: str, count: int, at: float) -> list[Demand]:
    return [Demand(f"{namespace}{i}", None, None, namespace=namespace, scheduled_at=at + i) for i in range(count)]


def test_a_team_that_held_the_fleet_all_night_yields_to_one_that_had_nothing():
    night = accrued({}, {SLOTS: 4.0, "cpu": 16.0}, FLEET, 8 * HOUR, HOUR)  # the whole fleet, all night
    past = {"owls": dominant(night, HOUR)}
    assert past["owls"] > 0.99
    queue = _demands("owls", 4, 0.0) + _demands("larks", 4, 100.0)  # the owls asked first
    order = [d.namespace for d in interleave(queue, FairShare(FLEET, {}, (), past))]
    assert order[:4] == ["larks"] * 4  # until the larks hold as much as the owls' past
    plain = [d.namespace for d in interleave(queue, FairShare(FLEET, {}, ()))]
    assert plain[:2] == ["owls", "larks"]  # instantaneous DRF: turn by turn, first come first


def test_weights_divide_the_past_as_they_divide_what_is_held():
    fair = FairShare(FLEET, {"owls": 2.0}, (), {"owls": 0.5, "larks": 0.5})
    assert fair.share("owls") == pytest.approx(0.25) and fair.share("larks") == pytest.approx(0.5)
