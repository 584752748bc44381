"""B17 waste (issue 52's closing note): what preemption throws away on a contended fleet
where preemptors could be placed elsewhere during the grace, counted from the logs alone.

A real server (``--preemption-grace 3``) and 4 real workers under reserve allocation,
each advertising ``--resource accel=2`` (8 accel); every execution holds accel=1. 64
low-priority executions (24 quick) of 1-4 two-second steps (a task each, drawn from a
fixed seed, so lows end at staggered times) fill the fleet with a backlog; once it is
full, 16 high-priority ones (6 quick) of one 1 s task arrive one every 1.5 s. Each high
that finds the fleet full preempts, and during the 3 s grace other lows usually end,
so the preemptor can be placed elsewhere: the case issue 52's withdrawal is for.

Counted from the event logs only (so the same script measures a server from before
issue 52: ``PYTHONPATH=/path/to/old/tree python -m bench.b17_waste``):

  (a) ``preemptions``: victims' PREEMPTED notices;
  (b) ``withdrawn``: PREEMPTION_WITHDRAWN events;
  (c) ``ended_after_preemptor_started_elsewhere``: notices whose victim's attempt ended
      preempted after its preemptor had been claimed (WORKFLOW_CLAIMED) on another worker
      than the one being freed for it (aim 0); ``ended_without_notice``: attempts that
      ended preempted with no notice in force (after their preemption was withdrawn);
  (d) ``task_bodies_rerun``: tasks started (TASK_STARTED) but not completed in an attempt
      that ended preempted; ``task_bodies_rerun_marks`` counts the same from the side-effect
      files the task bodies write (each start appends to one), a check on the log's count;
  (e) ``lost_s``: the seconds each preempted attempt threw away since its last checkpoint
      (its last TASK_COMPLETED, or its claim), the log's form of ``preemption_lost_seconds``;
      ``lost_s_server`` sums the executions' own ``preemption_lost_seconds`` where the
      server has the field (issue 52 on).

    python -m bench.b17_waste [--quick] [--json PATH]    # about 90 s (quick: 45 s) loaded
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from bench.common import Figure, sigterm_as_interrupt, write_workflow
from flux.client import FluxClient
from flux.local import LocalCluster

GRACE = 3.0
WORKERS, ACCEL = 4, 2
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")

SOURCE = """
import asyncio
from pathlib import Path

from flux import ResourceRequest, task, workflow

MARKS = Path({marks!r})
ACCEL = ResourceRequest(resources={{"accel": 1}})


@task
async def step(label: str, n: int, seconds: float) -> int:
    with open(MARKS / f"{{label}}.{{n}}.start", "a") as f:  # one byte per time the body starts
        f.write("x")
    await asyncio.sleep(seconds)
    with open(MARKS / f"{{label}}.{{n}}.done", "a") as f:
        f.write("x")
    return n


@workflow.with_options(requests=ACCEL, priority="low")
async def low(ctx):
    for n in range(ctx.input["steps"]):
        await step(ctx.input["label"], n, 2.0)
    return ctx.input["label"]


@workflow.with_options(requests=ACCEL, priority="high")
async def high(ctx):
    return await step(ctx.input["label"], 0, 1.0)
"""


def _until(condition, timeout: float, what: str, period: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(period)
    raise TimeoutError(f"{what} after {timeout:.0f} s")


def _ended(client: FluxClient, ids: list[str], timeout: float) -> list[dict]:
    def ended() -> list[dict] | None:
        found = [client.execution(i) for i in ids]
        return found if all(e["state"] in TERMINAL for e in found) else None

    return _until(ended, timeout, f"{len(ids)} executions not all ended", period=1.0)


def _preempted(event: dict) -> bool:
    return event["type"] == "ATTEMPT_ENDED" and (event.get("value") or {}).get("end") == "preempted"


def attempts_lost(events: list[dict]) -> tuple[float, int]:
    """The seconds and the task bodies each preempted attempt in ``events`` threw away:
    from its last checkpoint (last TASK_COMPLETED, or its claim) to its end, and the tasks
    it started and did not complete."""
    lost, bodies, since, running = 0.0, 0, None, set()
    for event in events:
        kind = event["type"]
        if kind == "WORKFLOW_CLAIMED":
            since, running = event["time"], set()
        elif kind == "TASK_STARTED":
            running.add(event["task_id"])
        elif kind == "TASK_COMPLETED":
            running.discard(event["task_id"])
            since = event["time"] if since is not None else None
        elif kind == "ATTEMPT_ENDED":
            if _preempted(event) and since is not None:
                lost += max(0.0, event["time"] - since)
                bodies += len(running)
            since, running = None, set()
    return lost, bodies


def notices(events: list[dict]) -> tuple[list[tuple[dict, dict | None]], int]:
    """Each PREEMPTED notice in a victim's log with how it ended: the ATTEMPT_ENDED
    (preempted) that followed it, or None (withdrawn, or the execution finished); and how
    many attempts ended preempted with no notice in force (after its withdrawal, say)."""
    out, open_notice, unannounced = [], None, 0
    for event in events:
        value = event.get("value") or {}
        if event["type"] == "PREEMPTED" and "by" in value:
            open_notice = event
            out.append([event, None])
        elif event["type"] == "PREEMPTION_WITHDRAWN" or (event["type"] == "ATTEMPT_ENDED" and not _preempted(event)):
            open_notice = None
        elif _preempted(event):
            if open_notice is None:
                unannounced += 1
            else:
                out[-1][1], open_notice = event, None
    return [(n, e) for n, e in out], unannounced


def count(logs: dict[str, list[dict]]) -> dict[str, float]:
    """(a)-(e) of the module docstring, and the preemptors placed elsewhere, from the logs."""
    claims = {  # each execution's claims: (when, on which worker)
        i: [
            (e["time"], e.get("worker_name") or (e.get("value") or {}).get("worker"))
            for e in log
            if e["type"] == "WORKFLOW_CLAIMED"
        ]
        for i, log in logs.items()
    }
    found = dict(preemptions=0, withdrawn=0, ended=0, ended_after_elsewhere=0, placed_elsewhere=0, unannounced=0)
    lost, bodies = 0.0, 0
    for log in logs.values():
        found["withdrawn"] += sum(e["type"] == "PREEMPTION_WITHDRAWN" for e in log)
        pairs, unannounced = notices(log)
        found["unannounced"] += unannounced
        for notice, end in pairs:
            value = notice["value"]
            found["preemptions"] += 1
            until = end["time"] if end is not None else value.get("deadline", notice["time"] + GRACE)
            elsewhere = [
                t for t, w in claims.get(value["by"], []) if notice["time"] <= t <= until and w != value["worker"]
            ]
            found["placed_elsewhere"] += bool(elsewhere)
            if end is not None:
                found["ended"] += 1
                found["ended_after_elsewhere"] += bool(elsewhere)
        seconds, started = attempts_lost(log)
        lost, bodies = lost + seconds, bodies + started
    return {**found, "lost_s": lost, "bodies": bodies}


def scenario(client: FluxClient, marks: Path, lows: int, highs: int, keep: Path | None = None) -> list[Figure]:
    rng = random.Random(52)
    low_ids = [client.run("low", {"label": f"low{i}", "steps": rng.randint(1, 4)})["id"] for i in range(lows)]
    _until(lambda: len(client.list_executions(state="RUNNING", limit=100)) >= WORKERS * ACCEL, 90, "fleet not full")
    high_ids = []
    for i in range(highs):
        high_ids.append(client.run("high", {"label": f"high{i}"})["id"])
        time.sleep(1.5)
    done = _ended(client, high_ids + low_ids, lows * 8 / (WORKERS * ACCEL) + 180)
    logs = {e["id"]: client.events(e["id"]) for e in done}
    if keep is not None:  # every log, to look into a count
        keep.write_text(json.dumps(logs))
    found = count(logs)
    waits = [e["started_at"] - e["scheduled_at"] for e in done[:highs] if e["started_at"] is not None]
    starts = [p for p in marks.iterdir() if p.name.endswith(".start")]
    reruns_marks = sum(len(p.read_text()) - 1 for p in starts)
    done_twice = sum(1 for p in marks.iterdir() if p.name.endswith(".done") and len(p.read_text()) > 1)
    server_lost = [e["preemption_lost_seconds"] for e in done if e.get("preemption_lost_seconds") is not None]
    completed = sum(e["state"] == "COMPLETED" for e in done)
    ratio = f"{found['placed_elsewhere']} of {found['preemptions']} preemptors claimed elsewhere in the grace"
    out = [
        Figure.of("B17.waste.high_submit_to_started_s", waits, "s", with_p99=True, note=f"{len(waits)} high"),
        Figure("B17.waste.preemptions", found["preemptions"], None, "notices", 1, note=ratio),
        Figure("B17.waste.withdrawn", found["withdrawn"], None, "preemptions", 1),
        Figure("B17.waste.victims_ended", found["ended"], None, "attempts", 1),
        Figure(
            "B17.waste.ended_without_notice",
            found["unannounced"],
            None,
            "attempts",
            1,
            note="ended preempted with no notice in force (its preemption withdrawn before)",
        ),
        Figure(
            "B17.waste.ended_after_preemptor_started_elsewhere",
            found["ended_after_elsewhere"],
            None,
            "attempts",
            1,
            "0",
            found["ended_after_elsewhere"] == 0,
        ),
        Figure("B17.waste.task_bodies_rerun", found["bodies"], None, "tasks", 1, note="from the logs"),
        Figure("B17.waste.task_bodies_rerun_marks", reruns_marks, None, "tasks", 1, note="from the side-effect files"),
        Figure("B17.waste.lost_s", found["lost_s"], None, "task-s", 1, note="from the logs"),
    ]
    if server_lost:
        out.append(
            Figure("B17.waste.lost_s_server", sum(server_lost), None, "task-s", 1, note="preemption_lost_seconds")
        )
    out.append(Figure("B17.waste.completed_tasks_rerun", done_twice, None, "tasks", 1, "0", done_twice == 0))
    out.append(
        Figure("B17.waste.completed", completed, None, "executions", 1, f"= {len(done)}", completed == len(done))
    )
    return out


def run(quick: bool, runner: str, keep: Path | None = None) -> list[Figure]:
    lows, highs = (24, 6) if quick else (64, 16)
    with (
        tempfile.TemporaryDirectory(prefix="b17w-") as tmp,
        LocalCluster(Path(tmp), server_args=("--preemption-grace", str(GRACE))) as cluster,
    ):
        marks = Path(tmp) / "marks"
        marks.mkdir()
        cluster.start_server(60)
        for i in range(WORKERS):
            cluster.start_worker(
                f"w{i}",
                max_concurrent_executions=4,
                runner=runner,
                timeout=60,
                extra_args=("--resource", f"accel={ACCEL}", "--allocation", "reserve"),
            )
        client = FluxClient(cluster.server_url)
        client.register(write_workflow(Path(tmp), SOURCE.format(marks=str(marks)), "b17w"))
        try:
            return scenario(client, marks, lows, highs, keep)
        finally:
            client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="24 low and 6 high executions")
    parser.add_argument("--runner", default="subprocess", choices=("subprocess", "inprocess"))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--logs", type=Path, help="also write every execution's event log here")
    args = parser.parse_args()
    started = time.monotonic()
    with sigterm_as_interrupt():
        figures = run(args.quick, args.runner, args.logs)
    for figure in figures:
        print(figure.line(), flush=True)
    print(f"B17 waste: {'quick' if args.quick else 'full'} form, {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"figures": [f.record() for f in figures]}, indent=2))


if __name__ == "__main__":
    main()
