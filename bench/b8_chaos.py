"""B8 chaos: workers SIGKILLed at random while a stream of runs goes through them.

    python -m bench.b8_chaos --quick                # 60 runs at 6/s (about a minute)
    python -m bench.b8_chaos                        # 500 runs at 20/s, a kill every 2 s
    python -m bench.b8_chaos --runs 500 --rate 10 --kill-every 1 --json /tmp/b8.json

One ``LocalCluster`` (a temporary home, SQLite, eviction grace 2 s, server
``--attempt-backoff 0.2 --max-attempts 20`` so repeated kills do not fail a run) and 4
subprocess-runner workers ``w0``..``w3`` (heartbeat 0.2 s, 4 slots each). The workflow
runs 3 tasks in sequence. Each task appends a line ``execution_id task_id attempt time``
to one shared side-effect file about every 50 ms for about 0.25 s, then
``DONE execution_id task_id attempt time`` just before it returns (``open(path, "a")``,
one write per line: small ``O_APPEND`` writes do not interleave).

``--runs`` runs are submitted at ``--rate`` runs/s. Meanwhile a killer thread SIGKILLs
a random worker every ``--kill-every`` s: the worker process only, not its process
group (its subprocess children must die with it on their own, PR_SET_PDEATHSIG), and
restarts it under the same name ``--restart-after`` s later (a restart hands the dead
incarnation's executions back at once). Killing stops once every run has been
submitted and no more runs are unfinished than the fleet has slots (the backlog has
been picked up); then every run gets up to ``--drain-timeout`` s to end. Afterwards the
event log of every run (``GET /executions/{id}/events``) is read against the
side-effect file:

* ``runs_completed`` / ``runs_failed`` / ``runs_lost``: lost = not terminal at the
  deadline, or never accepted by the server.
* ``completed_tasks_reexecuted``: a task whose TASK_COMPLETED is in the log, recorded by
  attempt A (the last ATTEMPT_STARTED before it in ``seq`` order), whose body wrote any
  line in an attempt later than A: a recorded result that ran again instead of being
  replayed. A body that wrote DONE but was killed before its TASK_COMPLETED reached the
  server legitimately runs again (results are exactly once, bodies at least once); those
  are counted on their own (``done_but_unrecorded_reruns``), as are bodies cut short by a
  kill and run again (``interrupted_reruns``).
* ``fenced_writes``: side-effect lines an attempt wrote more than 1.0 s after its
  ATTEMPT_ENDED (server clock, same host). ``fenced_max_lateness_s`` is the largest
  ``line time - ATTEMPT_ENDED time`` seen over every attempt that ended (negative: every
  line came before its attempt's end). Lines that name an attempt the log never
  started are counted in ``stray_lines``.
* ``orphans``: processes left in a killed worker's process group after the kills, i.e.
  children that outlived their worker (they are SIGKILLed by pid at the end).
* ``kills``, ``attempts_total`` (the sum of every run's ``attempt``), ``crashes_total``,
  ``runs_per_s`` (completed / last ``finished_at`` - first ``scheduled_at``),
  ``submit_to_completed_s`` (p50/p95), ``wall_s``.

The three invariants carry the aim ``0``: ``runs_lost``, ``completed_tasks_reexecuted``
and ``fenced_writes``. A miss is printed; the exit status is 1 only if the scenario
itself crashed. Every process started (server, workers, restarted workers) is stopped
at the end, also on an error or Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench.chaos_audit import TOLERANCE_S, Analysis, audit, not_terminal, outcomes, parse_side_effects
from bench.common import Figure, sigterm_as_interrupt, write_workflow
from flux.client import FluxClient, FluxClientError
from flux.local import LocalCluster

WORKFLOW = "b8_chaos"

SOURCE = """
import asyncio
import time

from flux import current_task, task, workflow


def _append(path, text):
    with open(path, "a") as out:  # one small write per open: O_APPEND keeps lines whole
        out.write(text + "\\n")


@task
async def step(path, seconds, tick):
    call = current_task()
    me = f"{call.execution_id} {call.task_id} {call.attempt}"
    until = time.time() + seconds
    while True:
        _append(path, f"{me} {time.time()}")
        if time.time() >= until:
            break
        await asyncio.sleep(tick)
    _append(path, f"DONE {me} {time.time()}")
    return call.attempt


@workflow
async def b8_chaos(ctx):
    args = (ctx.input["log"], ctx.input["seconds"], ctx.input["tick"])
    return [await step(*args), await step(*args), await step(*args)]
"""


@dataclass
class Options:
    runs: int = 500
    rate: float = 20.0
    kill_every: float = 2.0
    restart_after: float = 0.3
    workers: int = 4
    slots: int = 4
    heartbeat: float = 0.2
    eviction_grace: float = 2.0
    max_attempts: int = 20
    backoff: float = 0.2
    task_seconds: float = 0.25
    tick: float = 0.05
    drain_timeout: float = 180.0
    seed: int | None = None
    quick: bool = False


# --- the killer ---------------------------------------------------------------------------


@dataclass
class Kill:
    at: float  # wall clock (time.time)
    worker: str
    pid: int
    restarted_at: float | None = None


@dataclass
class Killer:
    """SIGKILLs a random worker process every ``every`` s and restarts it under its name."""

    cluster: LocalCluster
    names: list[str]
    start: Callable[[str], subprocess.Popen]
    every: float
    restart_after: float
    rng: random.Random
    kills: list[Kill] = field(default_factory=list)
    #: Restarted workers that exited on their own (e.g. the name still held): restarted again.
    unexpected_exits: list[str] = field(default_factory=list)
    error: str | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="b8-killer", daemon=True)

    def begin(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        try:
            t0 = time.monotonic()
            for tick in range(1, 1_000_000):  # on a fixed grid: a restart does not stretch the gaps
                if self._stop.wait(max(0.0, t0 + tick * self.every - time.monotonic())):
                    return
                self._revive_exited()
                self._kill_one()
        except Exception:  # noqa: BLE001 - reported with the figures
            self.error = traceback.format_exc()

    def _revive_exited(self) -> None:
        for name in self.names:
            process = self.cluster.workers.get(name)
            if process is not None and process.poll() is not None:
                self.cluster.workers.pop(name)
                tail = self.cluster.log(f"worker-{name}").strip().splitlines()[-1:]
                self.unexpected_exits.append(f"{name} (status {process.returncode}: {tail[0] if tail else ''})")
                self.start(name)

    def _kill_one(self) -> None:
        alive = [n for n in self.names if n in self.cluster.workers and self.cluster.workers[n].poll() is None]
        if not alive:
            return
        name = self.rng.choice(alive)
        process = self.cluster.workers.pop(name)
        kill = Kill(time.time(), name, process.pid)
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGKILL)  # the worker alone: its children must follow by themselves
        process.wait(timeout=15)
        self.kills.append(kill)
        time.sleep(self.restart_after)
        self.start(name)
        kill.restarted_at = time.time()


def _process_groups() -> dict[int, list[int]]:
    """pgid -> pids of every process visible in /proc."""
    groups: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp ...
        if len(fields) >= 3 and fields[0] != "Z":
            groups[int(fields[2])].append(int(entry))
    return groups


def orphans(kills: list[Kill]) -> list[int]:
    """Processes still in the process group of a killed worker: children that outlived it.

    A process group id is not reused while the group has members, so a group named by a
    dead worker's pid holds only that worker's descendants."""
    groups = _process_groups()
    found: list[int] = []
    for pid in {k.pid for k in kills}:
        if Path(f"/proc/{pid}").exists():
            continue  # the pid was reused (or a zombie not yet reaped): not one of our groups
        found += groups.get(pid, [])
    return sorted(found)


# --- submitting and waiting ----------------------------------------------------------------


def submit_stream(client: FluxClient, opts: Options, log: Path, ids: list[str], errors: Counter) -> float:
    """Submit ``opts.runs`` runs at ``opts.rate``/s; returns the seconds it took."""
    payload = {"log": str(log), "seconds": opts.task_seconds, "tick": opts.tick}
    t0 = time.monotonic()
    for i in range(opts.runs):
        delay = t0 + i / opts.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        for attempt in range(5):
            try:
                ids.append(client.run(WORKFLOW, payload)["id"])
                break
            except FluxClientError as exc:
                errors[str(exc)[:80]] += 1
                time.sleep(0.2 * (attempt + 1))
        if (i + 1) % 100 == 0:
            print(f"  submitted {i + 1}/{opts.runs}", file=sys.stderr, flush=True)
    return time.monotonic() - t0


def snapshot(client: FluxClient, ids: list[str]) -> dict[str, dict]:
    """The state of every run of ours (one list call; falls back to one call per run)."""
    wanted = set(ids)
    try:
        rows = {e["id"]: e for e in client.list_executions(workflow=WORKFLOW, limit=1000) if e["id"] in wanted}
    except FluxClientError:
        rows = {}
    if len(rows) < len(wanted) and len(wanted) > 1000:
        for execution_id in wanted - rows.keys():
            with contextlib.suppress(FluxClientError):
                rows[execution_id] = client.execution(execution_id)
    return rows


def events_of(client: FluxClient, ids: list[str]) -> dict[str, list[dict] | None]:
    """The event log of every run, for :func:`bench.chaos_audit.audit` (None: unreadable)."""
    found: dict[str, list[dict] | None] = {}
    for execution_id in ids:
        try:
            found[execution_id] = client.events(execution_id)
        except FluxClientError:
            found[execution_id] = None
    return found


def read_side_effects(path: Path) -> tuple[dict, int]:
    """:func:`bench.chaos_audit.parse_side_effects` of the file (none yet: no lines)."""
    return parse_side_effects(path.read_text(errors="replace").splitlines() if path.exists() else [])


# --- figures ---------------------------------------------------------------------------------


class Count(Figure):
    """A single count: printed as a whole number in the median column (no p95)."""

    def line(self) -> str:
        verdict = "" if self.met is None else (": met" if self.met else ": MISSED")
        aim = f"  (aim {self.aim}{verdict})" if self.aim else ""
        return f"{self.name:<48} {self.median:>10.0f} {'-':>10}  {self.unit:<12} n={self.n}{aim}"


def one(name: str, value: float, unit: str, *, zero_aim: bool = False, note: str | None = None) -> Figure:
    return Figure(name, value, value, unit, 1, "0" if zero_aim else None, (value == 0) if zero_aim else None, note)


def count(name: str, value: int, unit: str, *, zero_aim: bool = False, note: str | None = None) -> Figure:
    return Count(name, value, None, unit, 1, "0" if zero_aim else None, (value == 0) if zero_aim else None, note)


def _few(items: list, limit: int = 5) -> str:
    return ", ".join(str(i) for i in items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def figures(
    opts: Options,
    ids: list[str],
    rows: dict[str, dict],
    submit_errors: Counter,
    submit_s: float,
    killer: Killer,
    found_orphans: list[int],
    analysis: Analysis,
    bad_lines: int,
    wall_s: float,
    drained: bool,
) -> list[Figure]:
    runs = outcomes(opts.runs, ids, rows)
    completed, failed, never_accepted, lost = runs.completed, runs.failed, runs.never_accepted, runs.lost
    attempts = sum(int(r.get("attempt") or 0) for r in rows.values() if r["id"] in set(ids))
    crashes = sum(int(r.get("crashes") or 0) for r in rows.values() if r["id"] in set(ids))
    multi = sum(1 for i in ids if int(rows.get(i, {}).get("attempt") or 0) > 1)
    if completed:
        window = max(r["finished_at"] for r in completed) - min(r["scheduled_at"] for r in completed)
        runs_per_s = len(completed) / window if window > 0 else float("nan")
    else:
        runs_per_s = float("nan")
    e2e = [r["finished_at"] - r["scheduled_at"] for r in completed if r.get("finished_at")]
    kill_gaps = [b.at - a.at for a, b in zip(killer.kills, killer.kills[1:])]
    by_worker = Counter(k.worker for k in killer.kills)

    lost_note = None
    if lost:
        states = Counter(rows.get(i, {}).get("state", "missing") for i in runs.not_terminal)
        lost_note = f"not terminal: {dict(states)} e.g. {_few(runs.not_terminal, 3)}" + (
            f"; {never_accepted} never accepted" if never_accepted else ""
        )
    failed_note = "; ".join(f"{r['id']}: {(r.get('error') or '')[:120]}" for r in failed[:3]) or None
    fenced_note = (
        "none"
        if not analysis.fenced
        else "e.g. " + _few([f"{r} {t} attempt {a} +{late:.2f}s" for r, t, a, late in analysis.fenced], 3)
    )
    reexec_note = (
        "none"
        if not analysis.reexecuted
        else "e.g. "
        + _few([f"{r} {t} recorded by attempt {a}, ran again in {b}" for r, t, a, b in analysis.reexecuted], 3)
    )
    anomalies = []
    if analysis.duplicate_completions:
        anomalies.append(
            f"{len(analysis.duplicate_completions)} duplicate TASK_COMPLETED "
            f"({_few(analysis.duplicate_completions, 3)})"
        )
    if analysis.completions_outside_attempt:
        anomalies.append(f"{len(analysis.completions_outside_attempt)} TASK_COMPLETED outside an open attempt")
    if analysis.events_unreadable:
        anomalies.append(f"events of {len(analysis.events_unreadable)} runs unreadable")
    if bad_lines:
        anomalies.append(f"{bad_lines} malformed side-effect lines")
    if analysis.lines_of_open_attempts:
        anomalies.append(f"{analysis.lines_of_open_attempts} lines from attempts that never ended (not judged)")

    return [
        count(
            "B8.runs_completed",
            len(completed),
            "runs",
            note=f"of {opts.runs} submitted at {opts.rate:g}/s ({submit_s:.1f} s);"
            f" {multi} needed more than one attempt",
        ),
        count("B8.runs_failed", len(failed), "runs", note=failed_note),
        count(
            "B8.runs_lost",
            lost,
            "runs",
            zero_aim=True,
            note=lost_note
            or ("not terminal at the deadline, or never accepted" + ("" if drained else "; the drain deadline passed")),
        ),
        count("B8.completed_tasks_reexecuted", len(analysis.reexecuted), "task runs", zero_aim=True, note=reexec_note),
        count(
            "B8.fenced_writes",
            len(analysis.fenced),
            "lines",
            zero_aim=True,
            note=f"lines > {TOLERANCE_S:g} s after their attempt's ATTEMPT_ENDED: {fenced_note}",
        ),
        one(
            "B8.fenced_max_lateness_s",
            analysis.max_lateness if analysis.max_lateness > float("-inf") else float("nan"),
            "s",
            note="max(line time - ATTEMPT_ENDED time) over attempts that ended unfinished (killed); "
            "< 0: every line came before its attempt ended; finished attempts: "
            + (
                f"{analysis.max_lateness_finished:+.3f} s" if analysis.max_lateness_finished > float("-inf") else "none"
            ),
        ),
        Figure.of(
            "B8.kill_to_attempt_ended_s",
            analysis.kill_to_ended,
            "s",
            note="a worker's SIGKILL to the worker_lost ATTEMPT_ENDED of each attempt it held (restart or eviction)",
        ),
        count(
            "B8.stray_lines",
            len(analysis.stray_lines),
            "task runs",
            note="side-effect lines of an attempt the log never started"
            + (f": {_few(analysis.stray_lines, 3)}" if analysis.stray_lines else ""),
        ),
        count(
            "B8.done_but_unrecorded_reruns",
            analysis.done_unrecorded_reruns,
            "task runs",
            note="body wrote DONE, its TASK_COMPLETED never reached the server, ran again (allowed: at least once)",
        ),
        count(
            "B8.interrupted_reruns",
            analysis.interrupted_reruns,
            "task runs",
            note="body cut short by a kill, ran again in a later attempt",
        ),
        count(
            "B8.orphans",
            len(found_orphans),
            "processes",
            note="processes left in a killed worker's group after the kills"
            + (f": pids {_few(found_orphans)}" if found_orphans else ""),
        ),
        count(
            "B8.kills",
            len(killer.kills),
            "kills",
            note=f"every {opts.kill_every:g} s, by worker {dict(sorted(by_worker.items()))}"
            + (f"; median gap {sorted(kill_gaps)[len(kill_gaps) // 2]:.2f} s" if kill_gaps else "")
            + (
                f"; restarts that exited by themselves: {_few(killer.unexpected_exits, 3)}"
                if killer.unexpected_exits
                else ""
            ),
        ),
        count(
            "B8.attempts_total",
            attempts,
            "attempts",
            note=f"sum of every run's attempt; crashes {crashes}; ATTEMPT_ENDED by end: "
            f"{dict(sorted(analysis.ends.items()))}",
        ),
        one("B8.runs_per_s", runs_per_s, "runs/s", note="completed / (last finished_at - first scheduled_at)"),
        Figure.of("B8.submit_to_completed_s", e2e, "s", note="finished_at - scheduled_at of completed runs"),
        one(
            "B8.wall_s",
            wall_s,
            "s",
            note=("; ".join(anomalies) if anomalies else "cluster start to analysis end")
            + (f"; submit errors {dict(submit_errors)}" if submit_errors else ""),
        ),
    ]


# --- the scenario ----------------------------------------------------------------------------


def run(opts: Options, work: Path) -> tuple[list[Figure], dict[str, Any]]:
    t_start = time.monotonic()
    rng = random.Random(opts.seed)
    cluster = LocalCluster(
        work / "home",
        eviction_grace_period=opts.eviction_grace,
        server_args=("--attempt-backoff", str(opts.backoff), "--max-attempts", str(opts.max_attempts)),
    )
    names = [f"w{i}" for i in range(opts.workers)]
    log = work / "side-effects.log"

    def start(name: str) -> subprocess.Popen:
        return cluster.start_worker(
            name, heartbeat_interval=opts.heartbeat, max_concurrent_executions=opts.slots, wait=False
        )

    killer = Killer(cluster, names, start, opts.kill_every, opts.restart_after, rng)
    ids: list[str] = []
    submit_errors: Counter = Counter()
    try:
        cluster.start_server(timeout=60)
        for name in names:
            start(name)
        for name in names:
            cluster.wait_for_worker(name, timeout=60)
        with FluxClient(cluster.server_url, timeout=60) as client:
            client.register_file(write_workflow(work, SOURCE, "b8_chaos_workflow"))
            killer.begin()
            submit_s = submit_stream(client, opts, log, ids, submit_errors)

            # keep killing until the backlog has been picked up, then let every run end
            slots = opts.workers * opts.slots
            calm_deadline = time.monotonic() + opts.drain_timeout
            rows: dict[str, dict] = {}
            unfinished = len(ids)
            while time.monotonic() < calm_deadline:
                rows = snapshot(client, ids)
                unfinished = len(not_terminal(ids, rows))
                if unfinished <= slots:
                    break
                time.sleep(0.5)
            killer.stop()
            killing_stopped = time.monotonic()
            print(
                f"  kills stopped after {len(killer.kills)} kills; {unfinished} runs unfinished",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(1.0)  # PDEATHSIG is immediate; give a straggler a moment before looking
            found_orphans = orphans(killer.kills)

            deadline = killing_stopped + opts.drain_timeout
            drained = False
            while time.monotonic() < deadline:
                rows = snapshot(client, ids)
                if not not_terminal(ids, rows):
                    drained = True
                    break
                time.sleep(1.0)
            rows = snapshot(client, ids)
            for execution_id in ids:  # the definitive state of every run, one by one
                with contextlib.suppress(FluxClientError):
                    rows[execution_id] = client.execution(execution_id)
            side, bad_lines = read_side_effects(log)
            analysis = audit(events_of(client, ids), side, [(k.worker, k.at) for k in killer.kills])
        wall_s = time.monotonic() - t_start
        result = figures(
            opts, ids, rows, submit_errors, submit_s, killer, found_orphans, analysis, bad_lines, wall_s, drained
        )
        details = {
            "kills": [k.__dict__ for k in killer.kills],
            "unexpected_worker_exits": killer.unexpected_exits,
            "killer_error": killer.error,
            "reexecuted": analysis.reexecuted,
            "fenced": analysis.fenced,
            "stray_lines": analysis.stray_lines,
            "duplicate_completions": analysis.duplicate_completions,
            "completions_outside_attempt": analysis.completions_outside_attempt,
            "not_terminal": {i: rows.get(i, {}).get("state", "missing") for i in not_terminal(ids, rows)},
            "failed": {r["id"]: r.get("error") for r in outcomes(opts.runs, ids, rows).failed},
            "orphans": found_orphans,
        }
        if killer.error:
            raise RuntimeError(f"the killer thread crashed:\n{killer.error}")
        return result, details
    finally:
        if killer._thread.is_alive():
            killer.stop()
        cluster.close()
        for pid in orphans(killer.kills):  # children that outlived a killed worker: ours, by pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.b8_chaos", description="B8 chaos: random worker kills")
    parser.add_argument("--quick", action="store_true", help="60 runs at 6/s instead of 500 at 20/s")
    parser.add_argument("--runs", type=int, default=None, help="runs to submit [500; quick 60]")
    parser.add_argument("--rate", type=float, default=None, help="runs submitted per second [20; quick 6]")
    parser.add_argument("--kill-every", type=float, default=None, help="seconds between kills [2]")
    parser.add_argument("--restart-after", type=float, default=None, help="seconds from a kill to the restart [0.3]")
    parser.add_argument("--task-seconds", type=float, default=None, help="how long each of the 3 tasks appends [0.25]")
    parser.add_argument(
        "--drain-timeout", type=float, default=None, help="seconds every run gets to end once the kills stop [180]"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed for the choice of worker to kill")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, side-effect file)")
    parser.add_argument(
        "--json", type=Path, default=None, help="also write the figures (and details) to this JSON file"
    )
    args = parser.parse_args(argv)
    opts = Options(quick=args.quick)
    if args.quick:
        opts.runs, opts.rate = 60, 6.0
    for key in ("runs", "rate", "kill_every", "restart_after", "task_seconds", "drain_timeout", "seed"):
        if getattr(args, key) is not None:
            setattr(opts, key, getattr(args, key))

    work = Path(tempfile.mkdtemp(prefix="flux-b8-"))
    print(
        f"B8 chaos: {opts.runs} runs at {opts.rate:g}/s on {opts.workers} workers x {opts.slots} slots, "
        f"a random worker SIGKILLed every {opts.kill_every:g} s; work folder {work}",
        flush=True,
    )
    print(f"{'name':<48} {'median':>10} {'p95':>10}  unit", flush=True)
    status, results, details = "ok", [], {}
    t0 = time.monotonic()
    try:
        with sigterm_as_interrupt():
            results, details = run(opts, work)
        for figure in results:
            print(figure.line(), flush=True)
            if figure.note and (figure.met is False or figure.name.endswith(("failed", "kills", "attempts_total"))):
                print(f"{'':<4}{figure.name}: {figure.note}", flush=True)
    except KeyboardInterrupt:
        status = "interrupted"
        print("interrupted: every process stopped", flush=True)
    except Exception as exc:  # noqa: BLE001 - reported; exit status 1
        status = f"error: {type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        if args.keep:
            print(f"work folder kept: {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"done in {time.monotonic() - t0:.1f}s ({status})", flush=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "options": opts.__dict__,
                    "status": status,
                    "figures": [f.record() for f in results],
                    "details": details,
                },
                indent=2,
                default=str,
            )
            + "\n"
        )
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
