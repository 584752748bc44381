"""Webhooks as values (flux.domain.hooks): event names, matching, the signature, the
backoff, and the addresses a hook may not reach."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux.domain.hooks import (
    FLEET_EVENTS,
    HookEvent,
    HookEventType,
    Subscription,
    forbidden_address,
    parse_event_types,
    retry_delay,
    signature,
    verify,
)

T = HookEventType


def test_event_names_parse_in_order_without_repeats_and_unknown_ones_are_named():
    assert parse_event_types(["execution.failed", "worker.evicted", "execution.failed"]) == [
        T.EXECUTION_FAILED,
        T.WORKER_EVICTED,
    ]
    with pytest.raises(ValueError, match="unknown event.*'execution.exploded'.*known: execution.scheduled"):
        parse_event_types(["execution.exploded"])
    with pytest.raises(ValueError, match="unknown"):
        parse_event_types(["hook.test"])  # sent on demand, never subscribed to
    with pytest.raises(ValueError, match="at least one"):
        parse_event_types([])


def test_a_hook_gets_its_namespaces_events_its_workflows_only_and_every_fleet_event():
    hook = Subscription(1, "team", frozenset({T.EXECUTION_FAILED, T.WORKER_EVICTED}), workflow="train")
    failed = lambda ns, wf: HookEvent(T.EXECUTION_FAILED, "e1", ns, {}, workflow=wf)  # noqa: E731
    assert hook.wants(failed("team", "train"))
    assert not hook.wants(failed("other", "train"))
    assert not hook.wants(failed("team", "serve"))
    assert hook.wants(HookEvent(T.WORKER_EVICTED, "worker:w1", None, {}))
    assert not hook.wants(HookEvent(T.EXECUTION_COMPLETED, "e1", "team", {}, workflow="train"))


def test_fleet_events_have_no_namespace_and_the_others_have_one():
    with pytest.raises(ValueError):
        HookEvent(T.WORKER_ONLINE, "worker:w", "default", {})
    with pytest.raises(ValueError):
        HookEvent(T.EXECUTION_FAILED, "e", None, {})
    assert T.DEVICE_UNHEALTHY in FLEET_EVENTS


@given(st.binary(max_size=200), st.text(min_size=1, max_size=40))
def test_a_signature_verifies_and_any_change_does_not(body, secret):
    header = signature(secret, 1_700_000_000, body)
    assert header.startswith("t=1700000000,v1=")
    assert verify(secret, header, body, now=1_700_000_100)
    assert not verify(secret, header, body + b"x", now=1_700_000_100)
    assert not verify(secret + "x", header, body, now=1_700_000_100)
    assert not verify(secret, header, body, now=1_700_000_000 + 301)  # a replay too old
    assert not verify(secret, "garbage", body)


@given(st.integers(1, 60), st.floats(0, 1, exclude_max=True))
def test_the_backoff_doubles_up_to_its_cap_with_half_of_it_jittered(failures, draw):
    delay = retry_delay(failures, 10.0, 3600.0, draw)
    ceiling = min(3600.0, 10.0 * 2 ** (failures - 1))
    assert ceiling / 2 <= delay <= ceiling


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "::1",
        "10.0.0.8",
        "172.16.3.4",
        "192.168.1.1",
        "169.254.169.254",
        "fe80::1",
        "fc00::1",
        "100.64.1.1",
        "0.0.0.0",
        "224.0.0.1",
        "::ffff:127.0.0.1",
    ],
)
def test_the_servers_own_network_is_forbidden(address):
    assert forbidden_address(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "8.8.8.8"])
def test_public_addresses_are_allowed(address):
    assert forbidden_address(address) is None
