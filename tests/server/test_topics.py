"""Notifier keys are built and parsed in one place (``flux.server.topics``): what one
side builds, the other parses back to the same kind and subject."""

from __future__ import annotations

from flux.server import topics
from flux.server.topics import Kind, Topic


def test_every_key_parses_back_to_its_kind_and_subject():
    assert topics.parse(topics.worker("w-1")) == Topic(Kind.WORKER, "w-1")
    assert topics.parse(topics.execution("abc")) == Topic(Kind.EXECUTION, "abc")
    assert topics.parse(topics.events("abc")) == Topic(Kind.EVENTS, "abc")
    assert topics.parse(topics.logs("abc")) == Topic(Kind.LOGS, "abc")
    assert topics.parse(topics.status("w-1")) == Topic(Kind.STATUS, "w-1")
    assert topics.parse(topics.of(Kind.EVENTS, "abc")) == Topic(Kind.EVENTS, "abc")


def test_auth_keys_carry_a_token_prefix_or_say_revoked():
    assert topics.auth("w", "0123456789abcdef" * 4) == "auth:w:0123456789abcdef"
    assert topics.parse(topics.auth("w", "0123456789abcdef" * 4)) == Topic(Kind.AUTH, "w", "0123456789abcdef")
    assert topics.parse(topics.auth("w", None)) == Topic(Kind.AUTH, "w", topics.REVOKED)


def test_keys_without_a_subject_or_of_another_kind_parse_to_none():
    assert topics.parse(topics.EXECUTIONS) is None
    assert topics.parse(topics.SCHEDULES) is None
    assert topics.parse("nothing:here") is None
