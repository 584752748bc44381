"""B13's idle cost, one request at a time: the CPU of one heartbeat (``Publisher.beat``:
the sample, the request, the reply) and of one empty claim, in a worker's own process
against a real server, for this checkout and others (before and after, one sitting).

    python -m bench.b13_beats                                  # this checkout
    python -m bench.b13_beats --tree ../base --tree .           # interleaved, same server
    python -m bench.b13_beats --gpu-source auto                 # with GPU probing (no GPU: the retry)

Each tree runs in a subprocess (``PYTHONPATH=TREE``) that registers a worker, warms up,
then times ``--beats`` beats back to back (``time.process_time``: every thread of the
process), five times, and as many claims with ``wait=0`` three times; the figure is the
median of each tree's rounds over ``--rounds`` alternations of the trees.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import BenchCluster, Figure, print_figures

#: What runs in each tree's process: prints {"beat_ms": [...], "claim_ms": [...]}.
PROBE = """
import asyncio, json, sys, time
from flux.protocol.claims import ClaimReply, ClaimRequest
from flux.worker.config import WorkerConfig
from flux.worker.lifecycle import Worker

async def main(url, token, beats, gpu_source, name):
    config = WorkerConfig(name=name, server_url=url, bootstrap_token=token, runner="inprocess", gpu_source=gpu_source)
    worker = Worker(config)
    worker.session.open()
    await worker.register_worker()
    for _ in range(20):
        await worker.publisher.beat()
    beat, claim = [], []
    for _ in range(5):
        started = time.process_time()
        for _ in range(beats):
            await worker.publisher.beat()
        beat.append((time.process_time() - started) / beats * 1e3)
    for _ in range(3):
        started = time.process_time()
        for _ in range(beats):
            await worker.call(f"/workers/{name}/claim", ClaimRequest(wait=0), reply=ClaimReply)
        claim.append((time.process_time() - started) / beats * 1e3)
    await worker.session.close()
    print(json.dumps({"beat_ms": beat, "claim_ms": claim}))

asyncio.run(main(*sys.argv[1:3], int(sys.argv[3]), *sys.argv[4:6]))
"""


def measure(cluster: BenchCluster, tree: Path, beats: int, gpu_source: str, name: str) -> dict[str, list[float]]:
    token = (cluster.home / "bootstrap-token").read_text().strip()
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, cluster.server_url, token, str(beats), gpu_source, name],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, action="append", help="a checkout to measure (repeat) [this one]")
    parser.add_argument("--beats", type=int, default=100, help="beats (and claims) per timed round [100]")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the trees [2]")
    parser.add_argument("--gpu-source", default="none", help="the workers' --gpu-source [none, as B13's]")
    args = parser.parse_args()
    trees = args.tree or [Path.cwd()]
    seen: dict[Path, dict[str, list[float]]] = {tree: {"beat_ms": [], "claim_ms": []} for tree in trees}
    with tempfile.TemporaryDirectory(prefix="flux-b13-beats-") as home, BenchCluster(Path(home)) as cluster:
        cluster.start_server()
        for round_ in range(args.rounds):
            for n, tree in enumerate(trees):
                for key, values in measure(cluster, tree, args.beats, args.gpu_source, f"beats{round_}x{n}").items():
                    seen[tree][key] += values
    figures = [
        Figure.of(
            f"B13.{kind}_cpu_ms[{tree.name or tree.resolve().name}]", values, "ms", note=f"gpu source {args.gpu_source}"
        )
        for tree in trees
        for kind, values in (("beat", seen[tree]["beat_ms"]), ("claim", seen[tree]["claim_ms"]))
    ]
    print_figures(figures, width=48)


if __name__ == "__main__":
    main()
