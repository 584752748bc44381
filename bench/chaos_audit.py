"""The B8 chaos audit: what the event logs and the side-effect file say happened.

Pure functions of plain data (event dicts as ``GET /executions/{id}/events`` returns
them, execution rows, side-effect lines, kill times): no processes, no server, so the
rules that decide a B8 verdict can be tested on a made-up log
(``tests/test_chaos_audit.py``). ``bench.b8_chaos`` gathers the data and prints the
figures; its docstring defines each figure, and so the rules applied here: results are
exactly once (a recorded task never runs again), bodies at least once (one cut short, or
whose result never reached the server, may), and a fenced attempt stops writing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")
#: Lines written by an attempt this long after its ATTEMPT_ENDED are fenced writes.
TOLERANCE_S = 1.0


# --- runs --------------------------------------------------------------------------------------


def not_terminal(ids: list[str], rows: Mapping[str, dict]) -> list[str]:
    """The runs (in ``ids`` order) not yet COMPLETED, FAILED or CANCELLED; a run with no row counts.

    One rule for the drain loops and the verdict, so that "drained" and "lost" agree."""
    return [i for i in ids if rows.get(i, {}).get("state") not in TERMINAL]


@dataclass
class Outcomes:
    completed: list[dict]  # rows
    failed: list[dict]  # rows, FAILED or CANCELLED
    not_terminal: list[str]  # ids
    never_accepted: int  # runs the server never gave an id

    @property
    def lost(self) -> int:
        """Runs that did not end: not terminal at the deadline, or never accepted."""
        return len(self.not_terminal) + self.never_accepted


def outcomes(submitted: int, ids: list[str], rows: Mapping[str, dict]) -> Outcomes:
    """How each of the ``submitted`` runs ended, from its row (``ids``: those the server accepted).

    A kill may cost time, never a run: any run that is not terminal is lost."""
    return Outcomes(
        completed=[rows[i] for i in ids if rows.get(i, {}).get("state") == "COMPLETED"],
        failed=[rows[i] for i in ids if rows.get(i, {}).get("state") in ("FAILED", "CANCELLED")],
        not_terminal=not_terminal(ids, rows),
        never_accepted=submitted - len(ids),
    )


# --- the side-effect file ----------------------------------------------------------------------


@dataclass
class Line:
    attempt: int
    time: float
    done: bool


def parse_side_effects(lines: Iterable[str]) -> tuple[dict[str, dict[str, list[Line]]], int]:
    """execution id -> task id -> lines, and the number of malformed lines.

    Each body line is ``execution_id task_id attempt time``, ``DONE ...`` as its last; the
    file is the only witness of what a body did, whatever the server recorded."""
    by_run: dict[str, dict[str, list[Line]]] = defaultdict(lambda: defaultdict(list))
    bad = 0
    for raw in lines:
        parts = raw.split()
        done = bool(parts) and parts[0] == "DONE"
        if done:
            parts = parts[1:]
        try:
            execution_id, task_id, attempt, at = parts
            by_run[execution_id][task_id].append(Line(int(attempt), float(at), done))
        except ValueError:
            bad += 1
    return by_run, bad


# --- the event logs against the side-effect file -----------------------------------------------


@dataclass
class Analysis:
    reexecuted: list[tuple[str, str, int, int]] = field(default_factory=list)  # (run, task, recorded by, re-run in)
    done_unrecorded_reruns: int = 0
    interrupted_reruns: int = 0
    fenced: list[tuple[str, str, int, float]] = field(default_factory=list)  # (run, task, attempt, lateness)
    #: max(line time - ATTEMPT_ENDED time) over attempts that ended without finishing (killed ones)
    max_lateness: float = float("-inf")
    #: the same over attempts that finished the workflow (their DONE line comes just before the end)
    max_lateness_finished: float = float("-inf")
    #: seconds from the kill of a worker to the ATTEMPT_ENDED (worker_lost) of each attempt it held
    kill_to_ended: list[float] = field(default_factory=list)
    stray_lines: list[tuple[str, str, int]] = field(default_factory=list)
    lines_of_open_attempts: int = 0
    duplicate_completions: list[tuple[str, str]] = field(default_factory=list)
    completions_outside_attempt: list[tuple[str, str]] = field(default_factory=list)
    ends: Counter = field(default_factory=Counter)
    events_unreadable: list[str] = field(default_factory=list)


@dataclass
class _Attempts:
    """What one run's event log says about its attempts."""

    started: dict[int, int] = field(default_factory=dict)  # attempt -> seq of ATTEMPT_STARTED
    worker_of: dict[int, str] = field(default_factory=dict)  # attempt -> worker
    ended: dict[int, tuple[int, float, str]] = field(default_factory=dict)  # attempt -> (seq, time, end)
    recorded: dict[str, int] = field(default_factory=dict)  # task id -> attempt of its (first) TASK_COMPLETED


def audit(
    events_of: Mapping[str, list[dict] | None],
    side: Mapping[str, Mapping[str, list[Line]]],
    kills: Iterable[tuple[str, float]],
) -> Analysis:
    """Judge every run in ``events_of`` (execution id -> its events; None: they could not be read).

    ``side``: :func:`parse_side_effects`; ``kills``: (worker name, wall-clock time of its
    SIGKILL). The server's log says which attempt recorded what and when each ended; the
    side-effect file says what the bodies really did: the audit holds one against the other."""
    out = Analysis()
    kills_of: dict[str, list[float]] = defaultdict(list)
    for worker, at in kills:
        kills_of[worker].append(at)
    for execution_id, events in events_of.items():
        if events is None:
            out.events_unreadable.append(execution_id)
            continue
        attempts = _read_log(execution_id, sorted(events, key=lambda e: e["seq"]), kills_of, out)
        for task_id, lines in side.get(execution_id, {}).items():
            _judge_task(execution_id, task_id, lines, attempts, out)
    return out


def _read_log(execution_id: str, events: list[dict], kills_of: Mapping[str, list[float]], out: Analysis) -> _Attempts:
    """Replay one run's events in ``seq`` order: the attempt of each TASK_COMPLETED is the open one."""
    log = _Attempts()
    current: int | None = None
    for event in events:
        kind, value = event["type"], event.get("value") or {}
        if kind == "ATTEMPT_STARTED":
            current = int(value["attempt"])
            log.started[current] = event["seq"]
            log.worker_of[current] = value.get("worker") or event.get("worker_name") or ""
        elif kind == "ATTEMPT_ENDED":
            attempt = int(value.get("attempt", current or 0))
            end = value.get("end", "?")
            log.ended[attempt] = (event["seq"], event["time"], end)
            out.ends[end] += 1
            before = [at for at in kills_of.get(log.worker_of.get(attempt, ""), []) if at <= event["time"]]
            if end == "worker_lost" and before:
                out.kill_to_ended.append(event["time"] - max(before))
        elif kind == "TASK_COMPLETED":
            task_id = event["task_id"]
            if task_id in log.recorded:
                out.duplicate_completions.append((execution_id, task_id))
                continue
            if current is None or current in log.ended:
                out.completions_outside_attempt.append((execution_id, task_id))
            log.recorded[task_id] = current if current is not None else 0
    return log


def _judge_task(execution_id: str, task_id: str, lines: list[Line], log: _Attempts, out: Analysis) -> None:
    """One task's side-effect lines: fenced writes, lateness, and why each later attempt ran it again."""
    by_attempt: dict[int, list[Line]] = defaultdict(list)
    for line in lines:
        by_attempt[line.attempt].append(line)
    for attempt, mine in by_attempt.items():
        if attempt not in log.started:
            out.stray_lines.append((execution_id, task_id, attempt))
            continue
        if attempt in log.ended:
            _, end_time, end = log.ended[attempt]
            for line in mine:
                lateness = line.time - end_time
                if end == "finished":
                    out.max_lateness_finished = max(out.max_lateness_finished, lateness)
                else:
                    out.max_lateness = max(out.max_lateness, lateness)
                if lateness > TOLERANCE_S:
                    out.fenced.append((execution_id, task_id, attempt, lateness))
        else:
            out.lines_of_open_attempts += len(mine)
    # bodies that ran again in a later attempt
    attempts = sorted(by_attempt)
    for later in attempts[1:]:
        if task_id in log.recorded and log.recorded[task_id] < later:
            out.reexecuted.append((execution_id, task_id, log.recorded[task_id], later))
        elif any(line.done for a in attempts if a < later for line in by_attempt[a]):
            out.done_unrecorded_reruns += 1
        else:
            out.interrupted_reruns += 1
