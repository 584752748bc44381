"""The B8 chaos audit (bench/chaos_audit.py) on a made-up log: each fault it must catch,
and each re-run it must allow, lands in its own bucket, without starting any process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# bench/ is not an installed package: `python -m pytest` finds it through the working
# folder, a plain `pytest` (or one run from elsewhere) only through this.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.chaos_audit import TOLERANCE_S, audit, outcomes, parse_side_effects  # noqa: E402


def started(attempt, worker, time):
    return {"type": "ATTEMPT_STARTED", "time": time, "value": {"attempt": attempt, "worker": worker}}


def ended(attempt, end, time):
    return {"type": "ATTEMPT_ENDED", "time": time, "value": {"attempt": attempt, "end": end}}


def completed(task_id, time):
    return {"type": "TASK_COMPLETED", "time": time, "task_id": task_id, "value": {}}


def log(*events):
    """Number the events in order (seq), then hand them over shuffled: the audit sorts by seq."""
    numbered = [dict(event, seq=seq) for seq, event in enumerate(events, 1)]
    return numbered[::2] + numbered[1::2]


EVENTS = {
    # t1 recorded by attempt 1, then its body ran again in attempt 2: a result executed twice
    "rerun": log(
        started(1, "w0", 0.0),
        completed("t1", 1.0),
        ended(1, "worker_lost", 3.0),
        started(2, "w1", 3.5),
        ended(2, "finished", 6.0),
    ),
    # attempt 1 was fenced off at 12.0, yet its body still wrote at 12.0 + TOLERANCE_S + 0.5
    "late": log(started(1, "w1", 10.0), ended(1, "worker_lost", 12.0)),
    # a kill cut t1 short in attempt 1; attempt 2 ran it again and recorded it: allowed
    "interrupted": log(
        started(1, "w2", 20.0),
        ended(1, "worker_lost", 22.0),
        started(2, "w3", 22.5),
        completed("t1", 23.5),
        ended(2, "finished", 24.0),
    ),
    # t1 wrote DONE in attempt 1 but its TASK_COMPLETED never reached the server: allowed
    "done_unrecorded": log(
        started(1, "w2", 30.0),
        ended(1, "worker_lost", 32.0),
        started(2, "w3", 32.5),
        completed("t1", 33.5),
        ended(2, "finished", 34.0),
    ),
    "unreadable": None,
}
SIDE_EFFECTS = f"""
rerun t1 1 0.5
DONE rerun t1 1 0.9
rerun t1 2 4.0
DONE rerun t1 2 4.5
late t1 1 11.0
late t1 1 {12.0 + TOLERANCE_S + 0.5}
interrupted t1 1 21.0
interrupted t1 2 23.0
DONE interrupted t1 2 23.4
done_unrecorded t1 1 30.5
DONE done_unrecorded t1 1 31.0
done_unrecorded t1 2 33.0
DONE done_unrecorded t1 2 33.4
not a side-effect line
""".strip().splitlines()
KILLS = [("w0", 2.5), ("w1", 11.0), ("w2", 21.5), ("w2", 31.5)]


@pytest.fixture(scope="module")
def analysis():
    side, bad = parse_side_effects(SIDE_EFFECTS)
    assert bad == 1
    return audit(EVENTS, side, KILLS)


def test_a_recorded_task_that_ran_again_is_reexecuted(analysis):
    assert analysis.reexecuted == [("rerun", "t1", 1, 2)]


def test_a_write_after_the_fence_is_a_fenced_write(analysis):
    [(run, task, attempt, lateness)] = analysis.fenced
    assert (run, task, attempt) == ("late", "t1", 1)
    assert lateness == pytest.approx(TOLERANCE_S + 0.5)
    assert analysis.max_lateness == pytest.approx(TOLERANCE_S + 0.5)


def test_reruns_of_unrecorded_bodies_are_allowed_and_counted_apart(analysis):
    assert analysis.interrupted_reruns == 1
    assert analysis.done_unrecorded_reruns == 1


def test_the_log_itself_is_consistent(analysis):
    assert analysis.stray_lines == []
    assert analysis.duplicate_completions == []
    assert analysis.completions_outside_attempt == []
    assert analysis.lines_of_open_attempts == 0
    assert analysis.events_unreadable == ["unreadable"]
    assert analysis.ends == {"worker_lost": 4, "finished": 3}
    assert sorted(analysis.kill_to_ended) == pytest.approx([0.5, 0.5, 0.5, 1.0])


def test_a_run_not_terminal_or_never_accepted_is_lost():
    rows = {
        "a": {"id": "a", "state": "COMPLETED"},
        "b": {"id": "b", "state": "FAILED"},
        "c": {"id": "c", "state": "RUNNING"},
    }
    runs = outcomes(5, ["a", "b", "c", "d"], rows)
    assert [r["id"] for r in runs.completed] == ["a"]
    assert [r["id"] for r in runs.failed] == ["b"]
    assert runs.not_terminal == ["c", "d"]
    assert (runs.never_accepted, runs.lost) == (1, 3)
