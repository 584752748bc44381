"""bench.b17_waste counts issue 52's figures from event logs alone (so it measures a
server from before issue 52 too): these pin what each count means on a made-up log."""

from __future__ import annotations

import pytest

from bench.b17_waste import count


def ev(kind: str, at: float, value: dict | None = None, task: str | None = None, worker: str | None = None) -> dict:
    return {"type": kind, "time": at, "value": value, "task_id": task, "worker_name": worker}


def claimed(at: float, worker: str) -> dict:
    return ev("WORKFLOW_CLAIMED", at, {"worker": worker}, worker=worker)


ENDED = {"end": "preempted"}


def test_counts_a_victim_ended_after_its_preemptor_started_elsewhere_and_what_it_lost():
    logs = {
        "v1": [
            claimed(0.0, "w0"),
            ev("TASK_STARTED", 0.1, task="s0"),
            ev("TASK_COMPLETED", 2.0, task="s0"),
            ev("TASK_STARTED", 2.1, task="s1"),
            ev("PREEMPTED", 3.0, {"by": "p1", "worker": "w0", "deadline": 6.0}),
            ev("ATTEMPT_ENDED", 6.0, ENDED),
            claimed(7.0, "w0"),
        ],
        "p1": [ev("PREEMPTED", 3.0, {"victims": ["v1"], "worker": "w0"}), claimed(4.0, "w1")],
    }
    found = count(logs)
    assert found["preemptions"] == 1 and found["placed_elsewhere"] == 1
    assert found["ended"] == 1 and found["ended_after_elsewhere"] == 1
    assert found["bodies"] == 1  # s1 was running; s0 completed and replays
    assert found["lost_s"] == pytest.approx(4.0)  # from s0's completion to the end
    assert found["withdrawn"] == 0 and found["unannounced"] == 0


def test_a_withdrawn_notice_is_not_an_ended_victim_but_an_end_after_it_is_counted_apart():
    logs = {
        "v2": [
            claimed(0.0, "w2"),
            ev("PREEMPTED", 3.0, {"by": "p2", "worker": "w2", "deadline": 6.0}),
            ev("PREEMPTION_WITHDRAWN", 4.0, {"by": "p2", "worker": "w2"}),
            ev("ATTEMPT_ENDED", 6.0, ENDED),
        ],
        "p2": [claimed(3.5, "w3")],
    }
    found = count(logs)
    assert (found["preemptions"], found["withdrawn"], found["ended"], found["unannounced"]) == (1, 1, 0, 1)
    assert found["ended_after_elsewhere"] == 0 and found["placed_elsewhere"] == 1
    assert found["lost_s"] == pytest.approx(6.0)


def test_a_preemptor_placed_on_the_room_it_was_making_is_not_elsewhere():
    logs = {
        "v3": [
            claimed(0.0, "w0"),
            ev("PREEMPTED", 1.0, {"by": "p3", "worker": "w0", "deadline": 4.0}),
            ev("ATTEMPT_ENDED", 4.0, ENDED),
        ],
        "p3": [claimed(4.1, "w0")],
    }
    found = count(logs)
    assert found["ended"] == 1 and found["ended_after_elsewhere"] == 0 and found["placed_elsewhere"] == 0
