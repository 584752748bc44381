"""B16 task features (issue 16): what a cached call and a secret fetch cost end to end.

    python -m bench.b16_tasks            # 7 runs of each kind
    python -m bench.b16_tasks --quick    # 3

Each run is one execution of 20 sequential calls of a trivial task, through a real
server and a subprocess worker (SQLite): ``plain`` (no option), ``cache_miss`` (``cache=True``
with arguments never seen: a lookup round trip child -> worker -> server, the body, and
the entry stored on checkpoint), ``cache_hit`` (the same arguments again: a lookup, no
body) and ``secrets`` (``secret_requests``: a fetch round trip per call). Figures:
submit->completed per run, and the added cost per call against ``plain``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from cryptography.fernet import Fernet

from bench.common import BenchCluster, Figure, print_figures, write_workflow
from flux.client import FluxClient

CALLS = 20
SOURCE = """
    from flux import task, workflow

    @task
    async def plain(i, salt):
        return i

    @task.with_options(cache=True)
    async def cached(i, salt):
        return i

    @task.with_options(secret_requests=["BENCH"])
    async def secret(i, salt, secrets):
        return i

    STEPS = {"plain": plain, "cache_miss": cached, "cache_hit": cached, "secrets": secret}

    @workflow
    async def calls(ctx):
        step = STEPS[ctx.input["kind"]]
        return sum([await step(i, ctx.input["salt"]) for i in range(ctx.input["calls"])])
"""
KINDS = ("plain", "cache_miss", "cache_hit", "secrets")


def run(repeats: int) -> list[Figure]:
    os.environ["FLUX_SECRETS_KEY"] = Fernet.generate_key().decode()  # the server inherits it
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="flux-b16-") as home, BenchCluster(Path(home)) as cluster:
        cluster.start_server()
        cluster.start_worker("w1", heartbeat_interval=5.0)
        with FluxClient(cluster.server_url, timeout=120) as client:
            client.register_file(write_workflow(Path(home), SOURCE, "calls"))
            client.set_secret("BENCH", "bench-secret-value")
            for kind in KINDS:  # warm the child and the paths
                client.run("calls", {"kind": kind, "calls": 1, "salt": "warm"}, wait=60)
            for round_ in range(repeats):  # interleaved: noise hits every kind alike
                for kind in KINDS:
                    salt = f"r{round_}"  # cache_hit runs after cache_miss with the same arguments
                    began = time.perf_counter()
                    done = client.run("calls", {"kind": kind, "calls": CALLS, "salt": salt}, wait=120)
                    samples[kind].append((time.perf_counter() - began) * 1000)
                    if done["state"] != "COMPLETED":
                        raise RuntimeError(f"{kind}: {done['state']} {done.get('error')}")
    figures = [
        Figure.of(f"B16.{kind}.submit_completed_ms", samples[kind], "ms", note=f"{CALLS} calls") for kind in KINDS
    ]
    plain = statistics.median(samples["plain"])
    for kind in KINDS[1:]:
        per_call = [(t - plain) / CALLS for t in samples[kind]]
        figures.append(Figure.of(f"B16.{kind}.added_per_call_ms", per_call, "ms", note="against the median plain run"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs of each kind")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    print_figures(run(repeats=3 if args.quick else 7), args.json)


if __name__ == "__main__":
    main()
