"""B12 history (tracker issue 18's "B8 history"): list, status, metrics and
submit→completed as the stored history grows.

    python -m bench.b12_history                               # 0, 10k, 100k, 1M on SQLite and PostgreSQL
    python -m bench.b12_history --sizes 10000,1000000 --database postgres
    python -m bench.b12_history --quick                       # 0 and 2,000 on SQLite

For each database and size: a fresh database is migrated and seeded with that many
finished executions (one workflow, bulk INSERTs; the triggers of migration 0009 keep
the counts), then a real server and one real worker start on it and it prints:

- ``list_ms``: ``GET /executions`` (the default page of 50), ``list_workflow_ms`` with
  ``?workflow=``, ``list_deep_ms`` a page in the middle of the history (its cursor);
  on PostgreSQL the seeded database is vacuumed and analysed, as autovacuum would be
  over the time a real history takes to grow (Flux never runs ANALYZE on SQLite);
- ``status_ms``: ``GET /executions/ID``; ``metrics_ms``: ``GET /metrics``;
- ``submit_completed_ms`` (p50, p99) of one-task runs, alone and ``..._listing``
  while another client lists once a second.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

import httpx
from sqlalchemy import create_engine, insert, text

from bench.common import BenchCluster, Figure, print_figures, write_workflow
from flux.client import FluxClient, tls_verify
from flux.server.database import migrate, normalise_url
from flux.server.executions.history import encode_cursor
from flux.server.models import ExecutionModel, WorkflowModel

POSTGRES = os.environ.get("FLUX_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
SOURCE = """
    from flux import task, workflow

    @task
    def one(x):
        return x + 1

    @workflow
    async def tick(ctx):
        return await one(ctx.input)
"""
CHUNK = 10_000


def seed(url: str, count: int) -> tuple[float, str]:
    """``count`` finished executions of workflow "seeded"; returns the middle one's key."""
    engine = create_engine(normalise_url(url))
    start = time.time() - count - 3600
    middle = (start, "")
    with engine.begin() as connection:
        connection.execute(
            insert(WorkflowModel),
            [dict(id=1, name="seeded", version=1, source="", source_digest="", filename="seeded.py", created_at=start)],
        )
    for first in range(0, count, CHUNK):
        rows = []
        for i in range(first, min(first + CHUNK, count)):
            at = start + i
            rows.append(
                dict(
                    id=uuid.uuid4().hex,
                    workflow_id=1,
                    workflow_name="seeded",
                    workflow_version=1,
                    state="COMPLETED",
                    input={"i": i},
                    output=i,
                    row_version=1,
                    scheduled_at=at,
                    started_at=at,
                    finished_at=at + 0.5,
                    attempt=1,
                    crashes=0,
                    max_attempts=3,
                    version_pinned=False,
                    delivered=True,
                    last_seq=6,
                    checkpoint_batch=2,
                    last_log_seq=0,
                    log_batch=0,
                    log_truncated=False,
                )
            )
            if i == count // 2:
                middle = (at, rows[-1]["id"])
        with engine.begin() as connection:
            connection.execute(insert(ExecutionModel), rows)
    if engine.dialect.name == "postgresql":
        # What autovacuum does over the days a real history takes to grow: statistics, and the
        # dead versions of the counts rows a million trigger updates in minutes left behind.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM FULL execution_counts"))
            connection.execute(text("ANALYZE"))
    engine.dispose()
    return middle


def timed(call, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def runs(client: FluxClient, count: int) -> list[float]:
    samples = []
    for i in range(count):
        began = time.perf_counter()
        done = client.run("tick", i, wait=60)
        if done["state"] != "COMPLETED":
            raise RuntimeError(f"run {done['id']} ended {done['state']}")
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def measure(url: str, size: int, repeats: int, run_count: int) -> dict[str, list[float]]:
    middle = seed(url, size)
    with tempfile.TemporaryDirectory(prefix="flux-b12-") as home, BenchCluster(Path(home), database_url=url) as cluster:
        cluster.start_server()
        cluster.start_worker("w1", heartbeat_interval=5.0)
        base = cluster.server_url
        with FluxClient(base) as client, httpx.Client(base_url=base, timeout=60) as http:
            client.register_file(write_workflow(Path(home), SOURCE, "tick"))
            runs(client, 5)  # warm the worker's child and the server's caches
            some = client.list_executions(limit=1)[0]["id"]
            deep = encode_cursor(*middle)
            figures = {
                "list_ms": timed(lambda: http.get("/executions").raise_for_status(), repeats),
                "list_workflow_ms": timed(
                    lambda: http.get("/executions", params={"workflow": "seeded"}).raise_for_status(), repeats
                ),
                "list_deep_ms": timed(
                    lambda: http.get("/executions", params={"after": deep}).raise_for_status(), repeats
                ),
                "status_ms": timed(lambda: http.get(f"/executions/{some}").raise_for_status(), repeats),
                "metrics_ms": timed(lambda: http.get("/metrics").raise_for_status(), repeats),
                "submit_completed_ms": runs(client, run_count),
            }
            stop = threading.Event()
            other = httpx.Client(base_url=base, timeout=60, verify=tls_verify(base))  # built before: not timed
            lists: list[float] = []

            def lister() -> None:
                while not stop.wait(1.0):
                    began = time.perf_counter()
                    other.get("/executions").raise_for_status()
                    lists.append((time.perf_counter() - began) * 1000)

            thread = threading.Thread(target=lister, daemon=True)
            thread.start()
            try:  # long enough for several lists to fall among the runs
                figures["submit_completed_listing_ms"] = runs(client, run_count * 5)
            finally:
                stop.set()
                thread.join()
                other.close()
            figures["list_while_running_ms"] = lists
    return figures


def fresh_database(kind: str, home: Path, size: int) -> tuple[str, Callable[[], None]]:
    if kind == "sqlite":
        return f"sqlite:///{home / f'b12-{size}.db'}", lambda: None
    import psycopg

    name = f"flux_b12_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(POSTGRES, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return POSTGRES.rsplit("/", 1)[0] + f"/{name}", drop


def run(databases: list[str], sizes: list[int], repeats: int, run_count: int) -> list[Figure]:
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="flux-b12-db-") as scratch:
        for kind in databases:
            for size in sizes:
                url, drop = fresh_database(kind, Path(scratch), size)
                try:
                    migrate(url)
                    measured = measure(url, size, repeats, run_count)
                finally:
                    drop()
                for name, samples in measured.items():
                    figures.append(
                        Figure.of(f"B12.{kind}.{size}.{name}", samples, "ms", with_p99=name.startswith("submit"))
                    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 0 and 2,000 on SQLite, fewer samples")
    parser.add_argument("--sizes", default=None, help="stored executions, comma-separated [0,10000,100000,1000000]")
    parser.add_argument(
        "--database", default=None, help="sqlite, postgres or both [sqlite,postgres; sqlite with --quick]"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    sizes = [int(s) for s in (args.sizes or ("0,2000" if args.quick else "0,10000,100000,1000000")).split(",")]
    databases = [
        d.strip().replace("postgresql", "postgres")
        for d in (args.database or ("sqlite" if args.quick else "sqlite,postgres")).split(",")
    ]
    figures = run(databases, sizes, repeats=10 if args.quick else 30, run_count=10 if args.quick else 60)
    print_figures(figures, args.json, 52)
    for kind in databases:  # the aim: at 1M within 1.5x of 10k
        small, large = (10_000 if 10_000 in sizes else min(sizes)), max(sizes)
        by_name = {f.name: f.median for f in figures}
        for what in ("list_ms", "metrics_ms"):
            a, b = by_name.get(f"B12.{kind}.{small}.{what}"), by_name.get(f"B12.{kind}.{large}.{what}")
            if a and b:
                print(f"B12.{kind}.{what} at {large} / at {small}: {b / a:.2f}x")


if __name__ == "__main__":
    main()
