"""B17 contention (issue 34's B17; bench/b17_hostile.py is issue 31's): priorities and
preemption, fair share and quotas on a contended fleet, then the pure round's cost.

A real server (``--preemption-grace 2``) and 4 real workers under reserve allocation,
each advertising ``--resource accel=2`` (8 accel in all); every execution holds accel=1.

  (i)   100 low-priority executions holding accel for 5 s saturate the fleet, then 10
        high-priority ones arrive: high submit->started p50/p99 (``started_at`` -
        ``scheduled_at``; aim p99 <= grace + 2 s), that every preempted execution
        completes later, and completed tasks run again (one side-effect file per task
        and execution: a file written twice is a re-run; aim 0).
  (ii)  Two namespaces of weight 1 submit 200 and 20 executions at once: each one's share
        of the accel-seconds held (``claimed_at`` to ``finished_at``) while both have work
        waiting (from both first submissions to the moment either's queue empties; aim 50 % +- 10 %).
  (iii) A namespace with quota accel=2 submits more than that; every 100 ms the accel its
        CLAIMED, RUNNING and CANCELLING executions hold is sampled: samples over quota (aim 0).
  (iv)  ``bench.b17_round``: a round's pure placement cost with and without contention.

    python -m bench.b17_contention            # full: about 8 minutes on the shared 2-core VM
    python -m bench.b17_contention --quick    # smaller counts: 45-80 s there
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench import b17_round
from bench.common import Figure, p99, sigterm_as_interrupt, write_workflow
from flux.client import FluxClient
from flux.local import LocalCluster

GRACE = 2.0
WORKERS, ACCEL = 4, 2
HOLDING = ("CLAIMED", "RUNNING", "CANCELLING")
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")

SOURCE = """
import asyncio
from pathlib import Path

from flux import ResourceRequest, task, workflow

MARKS = Path({marks!r})
ACCEL = ResourceRequest(resources={{"accel": 1}})


def mark(name: str) -> None:
    with open(MARKS / name, "a") as f:
        f.write("x")


@task
async def begin(label: str) -> str:
    mark(label + ".begin")
    return label


@task
async def hold(label: str, seconds: float) -> str:
    await asyncio.sleep(seconds)  # a preemption during the sleep: the task never completed, it runs again
    mark(label + ".hold")
    return label


@workflow.with_options(requests=ACCEL, priority="low")
async def low(ctx):
    await begin(ctx.input["label"])
    return await hold(ctx.input["label"], ctx.input["seconds"])


@workflow.with_options(requests=ACCEL, priority="high")
async def high(ctx):
    return await begin(ctx.input["label"])


@workflow.with_options(requests=ACCEL)
async def share(ctx):
    await asyncio.sleep(ctx.input["seconds"])
    return "ok"
"""


@dataclass(frozen=True)
class Counts:
    lows: int = 100
    low_seconds: float = 5.0
    highs: int = 10
    big: int = 200
    small: int = 20
    share_seconds: float = 2.0
    quota_runs: int = 16


QUICK = Counts(lows=24, low_seconds=3.0, highs=4, big=40, small=8, share_seconds=1.0, quota_runs=6)


def _until(condition, timeout: float, what: str, period: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(period)
    raise TimeoutError(f"{what} after {timeout:.0f} s")


def _all(client: FluxClient, ids: list[str]) -> list[dict]:
    return [client.execution(i) for i in ids]


def _ended(client: FluxClient, ids: list[str], timeout: float) -> list[dict]:
    def ended() -> list[dict] | None:
        found = _all(client, ids)
        return found if all(e["state"] in TERMINAL for e in found) else None

    return _until(ended, timeout, f"{len(ids)} executions not all ended", period=1.0)


def _submit(client: FluxClient, workflow: str, inputs: list[dict]) -> list[str]:
    return [client.run(workflow, value)["id"] for value in inputs]


def preemption(client: FluxClient, marks: Path, counts: Counts) -> list[Figure]:
    lows = _submit(client, "low", [{"label": f"low{i}", "seconds": counts.low_seconds} for i in range(counts.lows)])
    _until(
        lambda: len(client.list_executions(state="RUNNING", limit=100)) >= WORKERS * ACCEL, 60, "the fleet never filled"
    )
    highs = _submit(client, "high", [{"label": f"high{i}"} for i in range(counts.highs)])
    done = _ended(client, highs, 120)
    waits = [e["started_at"] - e["scheduled_at"] for e in done if e["started_at"] is not None]
    ended = _ended(client, lows, counts.lows * counts.low_seconds + 120)
    preempted, lost, withdrawn = {}, 0.0, 0
    for e in ended:
        events = client.events(e["id"])
        notices = [ev["time"] for ev in events if ev["type"] == "PREEMPTED"]
        if notices:
            preempted[e["id"]] = (e, max(notices))
        lost += _lost(events)
        withdrawn += sum(ev["type"] == "PREEMPTION_WITHDRAWN" for ev in events)
    later = sum(1 for e, at in preempted.values() if e["state"] == "COMPLETED" and e["finished_at"] > at)
    reruns = sum(1 for path in marks.iterdir() if len(path.read_text()) > 1)
    aim = GRACE + 2
    return [
        Figure.of(
            "B17.preemption.high_submit_to_started_s",
            waits,
            "s",
            with_p99=True,
            aim=f"p99 <= {aim:g} s",
            check=lambda m, h: p99(waits) <= aim,
            note=f"{len(done)} high, {counts.lows} low of {counts.low_seconds:g} s",
        ),
        Figure("B17.preemption.preempted", len(preempted), None, "executions", 1),
        Figure(
            "B17.preemption.lost_s",
            lost,
            None,
            "task-s",
            1,
            note="seconds preempted attempts threw away, each from its last completed task (or claim) to its end",
        ),
        Figure("B17.preemption.withdrawn", withdrawn, None, "preemptions", 1, note="called off in their grace period"),
        Figure(
            "B17.preemption.preempted_completed_later",
            later,
            None,
            "executions",
            1,
            f"= {len(preempted)} (every one)",
            later == len(preempted),
        ),
        Figure(
            "B17.preemption.low_completed",
            sum(e["state"] == "COMPLETED" for e in ended),
            None,
            "executions",
            1,
            f"= {counts.lows}",
            all(e["state"] == "COMPLETED" for e in ended),
        ),
        Figure(
            "B17.preemption.completed_tasks_rerun",
            reruns,
            None,
            "tasks",
            1,
            "0",
            reruns == 0,
            note=f"{sum(1 for _ in marks.iterdir())} task side-effect files",
        ),
    ]


def _lost(events: list[dict]) -> float:
    """Seconds the preempted attempts in ``events`` threw away: from each one's last
    checkpoint (its last completed task, or its claim) to its end, from the log alone."""
    lost, since = 0.0, None
    for event in events:
        if event["type"] == "WORKFLOW_CLAIMED" or (event["type"] == "TASK_COMPLETED" and since is not None):
            since = event["time"]
        elif event["type"] == "ATTEMPT_ENDED" and since is not None:
            if (event.get("value") or {}).get("end") == "preempted":
                lost += max(0.0, event["time"] - since)
            since = None
    return lost


def _held(executions: list[dict], start: float, end: float) -> float:
    """Accel-seconds the executions held within [start, end] (each holds 1 from claim to finish)."""
    return sum(
        max(0.0, min(e["finished_at"], end) - max(e["claimed_at"], start)) for e in executions if e["claimed_at"]
    )


def fair_share(clients: dict[str, FluxClient], counts: Counts) -> list[Figure]:
    sizes = {"big": counts.big, "small": counts.small}
    value = {"seconds": counts.share_seconds}
    with ThreadPoolExecutor(2) as pool:  # both namespaces submit at once
        futures = {ns: pool.submit(_submit, clients[ns], "share", [value] * n) for ns, n in sizes.items()}
        ids = {ns: f.result() for ns, f in futures.items()}
    timeout = (counts.big + counts.small) * counts.share_seconds / (WORKERS * ACCEL) + 120
    ended = {ns: _ended(clients[ns], ids[ns], timeout) for ns in sizes}
    start = max(min(e["scheduled_at"] for e in ended[ns]) for ns in sizes)
    end = min(max(e["claimed_at"] for e in ended[ns]) for ns in sizes)  # one namespace's queue is empty from here
    held = {ns: _held(ended[ns], start, end) for ns in sizes}
    total = sum(held.values()) or float("nan")
    return [
        Figure(
            f"B17.fair_share.{ns}_{sizes[ns]}_share_pct",
            100 * held[ns] / total,
            None,
            "%",
            1,
            "50 +- 10",
            abs(100 * held[ns] / total - 50) <= 10,
            note=f"{held[ns]:.1f} accel-s of {total:.1f} over {end - start:.1f} s",
        )
        for ns in sizes
    ]


def quota(client: FluxClient, counts: Counts, limit: int = 2) -> list[Figure]:
    client.update_namespace(quota={"resources.accel": limit})
    ids = _submit(client, "share", [{"seconds": 1.0}] * counts.quota_runs)  # fewer than 100: one page lists them all
    samples, stop, sampler = [], threading.Event(), client.copy()  # the sampler has its own connection

    def sample() -> None:
        while not stop.is_set():
            began = time.monotonic()
            listed = sampler.list_executions(limit=100)  # one read: one state per execution (not one read per state)
            samples.append(sum(e["state"] in HOLDING for e in listed))
            stop.wait(max(0.0, 0.1 - (time.monotonic() - began)))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        _ended(client, ids, counts.quota_runs * 1.0 / limit + 120)
    finally:
        stop.set()
        thread.join(10)
        sampler.close()
    over = sum(1 for s in samples if s > limit)
    return [
        Figure(
            "B17.quota.samples_over_quota",
            over,
            None,
            "samples",
            len(samples),
            "0",
            over == 0,
            note=f"quota accel={limit}; most held {max(samples, default=0)}; a sample every 100 ms",
        ),
    ]


def run(quick: bool, runner: str) -> list[Figure]:
    counts = QUICK if quick else Counts()
    with (
        tempfile.TemporaryDirectory(prefix="b17c-") as tmp,
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
        source = write_workflow(Path(tmp), SOURCE.format(marks=str(marks)), "b17")
        clients = {ns: FluxClient(cluster.server_url, namespace=ns) for ns in ("default", "big", "small", "capped")}
        for ns, client in clients.items():
            if ns != "default":
                client.create_namespace(ns)
            client.register(source)
        figures = shown(preemption(clients["default"], marks, counts))
        figures += shown(fair_share(clients, counts))
        figures += shown(quota(clients["capped"], counts))
        for client in clients.values():
            client.close()
    return figures + shown(b17_round.figures(quick))


def shown(figures: list[Figure]) -> list[Figure]:
    """Each part's figures as soon as it is measured (a full run takes minutes)."""
    for figure in figures:
        print(figure.line(), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts (under 90 s)")
    parser.add_argument("--runner", default="subprocess", choices=("subprocess", "inprocess"))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    started = time.monotonic()
    print(f"{'name':<48} {'median':>10} {'p95':>10}  unit", flush=True)
    with sigterm_as_interrupt():
        figures = run(args.quick, args.runner)
    print(f"B17 contention: {'quick' if args.quick else 'full'} form, {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"figures": [f.record() for f in figures]}, indent=2))


if __name__ == "__main__":
    main()
