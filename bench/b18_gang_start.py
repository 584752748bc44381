"""B18 gang start: from the moment the last worker a waiting gang needs is free to every
member started (issue 53's aim: p50 <= 1 s here).

    python -m bench.b18_gang_start            # 15 gangs
    python -m bench.b18_gang_start --quick    # 5 gangs

One server (SQLite) and three workers in rack a, one slot each (real processes,
``flux.local``). Each sample: a ``blocker`` run holds worker a3; a gang of 3 in one rack
is submitted and waits (two workers free, it needs three); the blocker is released (a
file), ends, and frees a3. The figure is the gang's ``started_at`` (the last member's
arrival at the rendezvous: every member has started) less the blocker's ``finished_at``
(its worker free): the round that places the gang, the claims of its members, their
jobs, each member's process start and the rendezvous. Also printed: submission ->
started for a gang on an idle rack (``idle_start_s``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import BenchCluster, Figure, print_figures
from flux.client import FluxClient

SOURCE = """
import time
from pathlib import Path

from flux import Gang, workflow

GO = Path({go!r})


@workflow.with_options(affinity={{"slot": "blocker"}})
async def blocker(ctx):
    while not (GO / ctx.input).exists():
        time.sleep(0.01)
    return ctx.input


@workflow.with_options(gang=Gang(size=3, topology="rack"))
async def gang(ctx):
    return ctx.gang.rank
"""


def _wait(client: FluxClient, execution_id: str, state: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        execution = client.execution(execution_id)
        if execution["state"] == state:
            return execution
        time.sleep(0.02)
    raise TimeoutError(f"{execution_id} never {state}")


def _sample(client: FluxClient, go: Path, i: int) -> float:
    blocker = client.run("blocker", f"b{i}")
    _wait(client, blocker["id"], "RUNNING")
    gang = client.run("gang", {})
    time.sleep(0.5)  # a round has found it waiting
    (go / f"b{i}").touch()
    freed = _wait(client, blocker["id"], "COMPLETED")["finished_at"]
    started = client.wait(gang["id"], 60)
    assert started["state"] == "COMPLETED", (started["placement_note"], client.placement(gang["id"])["summary"])
    return started["started_at"] - freed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    samples = 5 if args.quick else 15
    with tempfile.TemporaryDirectory() as tmp:
        home, go = Path(tmp) / "home", Path(tmp) / "go"
        go.mkdir()
        cluster = BenchCluster(home)
        try:
            cluster.start_server()
            for name in ("a1", "a2", "a3"):  # the blocker runs on a3 only
                labels = {"rack": "a", **({"slot": "blocker"} if name == "a3" else {})}
                cluster.start_worker(name, labels=labels, max_concurrent_executions=1, wait=False)
            for name in ("a1", "a2", "a3"):
                cluster.wait_for_worker(name, 60)
            workflow = Path(tmp) / "gangs.py"
            workflow.write_text(SOURCE.format(go=str(go)))
            with FluxClient(cluster.server_url) as client:
                client.register_file(workflow)
                idle = []
                for _ in range(samples):
                    run = client.run("gang", {})
                    done = client.wait(run["id"], 60)
                    idle.append(done["started_at"] - done["scheduled_at"])
                freed = [_sample(client, go, i) for i in range(samples)]
        finally:
            cluster.close()
    print_figures(
        [
            Figure.of(
                "B18.gang_start_after_free_s",
                freed,
                "s",
                aim="p50 <= 1 s",
                check=lambda median, _high: median <= 1.0,
                with_p99=True,
            ),
            Figure.of("B18.gang_idle_start_s", idle, "s", with_p99=True),
        ]
    )


if __name__ == "__main__":
    main()
