"""A failure as data (flux.protocol.failures): what a task or workflow raised keeps its
type, message and every link of its chain with frames, each marked the user's or not;
people see the user's frames first and the whole traceback when they ask."""

from __future__ import annotations

import asyncio
import json

from flux.model.calls import failure_of
from flux.protocol.failures import MAX_FRAMES, Failure


class PaymentDeclined(Exception):
    pass


def charge(amount):
    raise PaymentDeclined(f"card refused for {amount}")


def raised(fn):  # noqa: ANN001, ANN201
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return Failure.model_validate(failure_of(exc))
    raise AssertionError("it did not raise")


def test_a_failure_carries_type_message_and_the_users_frames():
    failure = raised(lambda: charge(12))
    assert failure.type.endswith("test_failures.PaymentDeclined")
    assert failure.message == "card refused for 12"
    assert [frame.function for frame in failure.chain[-1].frames] == ["raised", "<lambda>", "charge"]
    assert all(frame.user for frame in failure.chain[-1].frames)
    assert "raise PaymentDeclined" in failure.chain[-1].frames[-1].code
    assert "PaymentDeclined: card refused for 12" in failure.traceback
    json.dumps(failure.model_dump())  # the wire form is JSON


def test_a_chain_is_kept_oldest_first_and_rendered_as_python_does():
    def wrapped():
        try:
            charge(3)
        except PaymentDeclined as exc:
            raise RuntimeError("the order failed") from exc

    failure = raised(wrapped)
    assert [link.type for link in failure.chain][-1] == "RuntimeError"
    assert failure.chain[0].leads_by == "cause" and failure.chain[-1].leads_by is None
    text = failure.rendered()
    assert text.index("card refused for 3") < text.index("direct cause") < text.index("RuntimeError: the order failed")


def test_flux_and_standard_library_frames_are_folded_away_unless_full():
    failure = raised(lambda: asyncio.run(asyncio.wait_for(_fails(), 5)))
    assert any(not frame.user for link in failure.chain for frame in link.frames)  # asyncio's frames
    short, full = failure.rendered(), failure.rendered(full=True)
    assert "asyncio/" not in short and "--full shows them" in short
    assert "asyncio/" in full and "_fails" in short


async def _fails():
    raise ValueError("bad input 'x'")


def test_a_deep_recursion_is_bounded():
    def down(n):  # noqa: ANN001, ANN202
        if n == 0:
            raise ValueError("bottom")
        down(n - 1)

    failure = raised(lambda: down(200))
    assert len(failure.chain[-1].frames) == MAX_FRAMES
    assert failure.chain[-1].frames[-1].function == "down"


def test_an_older_workers_event_has_no_failure():
    assert Failure.parsed({"error": "ValueError: x", "traceback": "..."}) is None
    assert Failure.parsed({"failure": {"type": 3}}) is None
    assert Failure.parsed("text") is None
