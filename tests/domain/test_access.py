"""Roles and principals (issue 33): properties of the role x action table."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flux.domain.access import ADMIN_ACTIONS, ALLOWED, FLEET_ACTIONS, ORDER, Action, Principal, Role

namespaces = st.sampled_from(["default", "ml", "data", "ci"])
principals = st.builds(
    Principal, st.just("t"), st.sampled_from(ORDER), st.none() | st.frozensets(namespaces, max_size=3)
)


def test_each_role_allows_what_the_one_below_it_does_and_more():
    for lower, higher in zip(ORDER, ORDER[1:]):
        assert ALLOWED[lower] < ALLOWED[higher]
    assert ALLOWED[Role.ADMIN] == frozenset(Action)
    assert not ADMIN_ACTIONS & ALLOWED[Role.OPERATOR]


@given(principals, st.sampled_from(list(Action)), namespaces)
def test_a_namespaced_action_needs_the_namespace_in_scope(principal, action, namespace):
    if action in FLEET_ACTIONS or action in ADMIN_ACTIONS:
        return
    allowed = principal.may(action, namespace)
    assert allowed == (action in ALLOWED[principal.role] and principal.sees(namespace))
    if principal.role == Role.ADMIN:
        assert allowed


@given(principals)
def test_the_fleet_is_seen_by_operators_and_by_tokens_of_every_namespace(principal):
    expected = principal.role in (Role.OPERATOR, Role.ADMIN) or principal.namespaces is None
    assert principal.may(Action.READ_FLEET) == expected
    assert principal.may(Action.DRAIN) == (principal.role in (Role.OPERATOR, Role.ADMIN))


def test_every_action_has_a_phrase_and_a_refusal_names_the_role_it_needs():
    from flux.domain.access import PHRASES, lowest_role, refusal

    assert set(PHRASES) == set(Action)
    viewer = Principal("t", Role.VIEWER)
    assert refusal(viewer, Action.RUN) == "role viewer may not run executions (developer or above)"
    assert lowest_role(Action.MANAGE_TOKENS) == Role.ADMIN
    for action in Action:
        assert action in ALLOWED[lowest_role(action)]
        assert all(action not in ALLOWED[role] for role in ORDER[: ORDER.index(lowest_role(action))])


@given(principals)
def test_the_home_namespace_is_one_the_token_may_act_in_or_none(principal):
    """Without -n a token acts in its only namespace, else ``default`` where it may act
    there; a token of several without ``default`` has none (whoami says: pass -n)."""
    home = principal.home
    if home is None:
        assert principal.namespaces is not None and len(principal.namespaces) != 1
        assert "default" not in principal.namespaces
    else:
        assert principal.sees(home)
        if principal.namespaces is not None and len(principal.namespaces) == 1:
            assert {home} == principal.namespaces
