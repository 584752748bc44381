"""``python -m bench``: run the Flux benchmarks and record them.

    python -m bench                  # full run (several minutes)
    python -m bench --quick          # under two minutes on a 2-core machine
    python -m bench --only B1,B3     # a subset
    python -m bench --database-url postgresql://postgres@127.0.0.1:5432/test
    # fleet scale (not by default):
    python -m bench --only B7 [--quick] [--b7-workers 10,100 --b7-database postgres ...]

Prints one line per figure (name, median, p95, unit) and writes a JSON record to
bench/results/<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Callable

from bench import b1_budget, b1_dispatch, b2_throughput, b3_replay, b5_matching, b6_burst, b6_postgres, b7_fleet
from bench.common import BenchCluster, Figure, Skipped, commit_facts, machine_facts, write_workflow
from bench.workflows import SOURCE
from flux.client import FluxClient
from flux.server.settings import redact_url

SCENARIOS = ("B1", "B2", "B3", "B5", "B6", "B7")
#: What a plain ``python -m bench`` runs: B7 (fleet scale, minutes and thousands of sockets) only on request.
DEFAULT_SCENARIOS = ("B1", "B2", "B3", "B5", "B6")
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
RUNNERS = ("subprocess", "inprocess")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Flux benchmark suite (issue 7)")
    parser.add_argument("--quick", action="store_true", help="smaller counts: the whole run stays under 2 minutes")
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT_SCENARIOS),
        help=f"comma-separated subset of {','.join(SCENARIOS)} [{','.join(DEFAULT_SCENARIOS)}]",
    )
    parser.add_argument(
        "--database-url", default=None, help="database for B1/B2 (default: a SQLite file in a temporary folder)"
    )
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("FLUX_BENCH_PG_URL", DEFAULT_PG_URL),
        help=f"PostgreSQL server for B6 [{DEFAULT_PG_URL}]",
    )
    parser.add_argument("--runners", default=",".join(RUNNERS), help="runners for B1/B2/B6 [subprocess,inprocess]")
    parser.add_argument(
        "--full-counts",
        action="store_true",
        help="with --quick: keep the full B1/B2 counts (e.g. to profile one scenario at full size)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=Path(__file__).resolve().parent / "results",
        help="where the JSON record goes [bench/results]",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (server and worker logs)")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="sample the server and worker processes (bench.sampler) into DIR/<backend>-<process>.txt; "
        "figures taken this way carry the sampler's overhead",
    )
    parser.add_argument("--note", action="append", default=[], help="free text stored in the record (repeatable)")
    b7 = parser.add_argument_group("B7 fleet scale (python -m bench --only B7; see also python -m bench.b7_fleet)")
    b7_fleet.add_arguments(b7, prefix="b7-")
    args = parser.parse_args(argv)
    args.runners = [r.strip() for r in args.runners.split(",") if r.strip()]
    if not args.runners or set(args.runners) - set(RUNNERS):
        parser.error(f"--runners: choose from {', '.join(RUNNERS)}")
    args.only = [name.strip().upper() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(args.only) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    return args


class Run:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.figures: list[Figure] = []
        self.scenarios: dict[str, dict] = {}

    def add(self, figures: list[Figure]) -> None:
        for figure in figures:
            print(figure.line(), flush=True)
        self.figures += figures

    def scenario(self, key: str, fn: Callable[[], list[Figure]]) -> None:
        t0 = time.monotonic()
        try:
            self.add(fn())
            status = {"status": "ok"}
        except Skipped as exc:
            print(f"{key}: SKIPPED: {exc}", flush=True)
            status = {"status": "skipped", "reason": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a failed scenario is recorded, the others still run
            print(f"{key}: ERROR: {type(exc).__name__}: {exc}", flush=True)
            status = {
                "status": "error",
                "reason": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8),
            }
        status["duration_s"] = round(time.monotonic() - t0, 2)
        self.scenarios.setdefault(key, {}).update(status)


def counts(quick: bool) -> dict:
    if quick:
        return {"b1": 40, "b2_repeats": 1, "b2_settle_s": 1.0}
    return {"b1": 200, "b2_repeats": 3, "b2_settle_s": 2.0}


def cluster_scenarios(
    run: Run, home: Path, database_url: str | None, backend: str, wanted: set[str], prefix: dict[str, str]
) -> None:
    """Start one server on ``database_url``, run the wanted B1/B2 variants with a fresh worker each."""
    args, n = run.args, counts(run.args.quick and not run.args.full_counts)
    cluster = BenchCluster(home, database_url=database_url, profile_dir=args.profile, tag=f"{backend}-")
    try:
        try:
            cluster.start_server(timeout=60)
        except Exception as exc:  # noqa: BLE001
            tail = [line.strip() for line in cluster.server_log_tail(4000).splitlines() if line.strip()]
            errors = [line for line in tail if re.match(r"^[\w.]*(Error|Exception)\b.*:", line)]
            reason = (errors or tail or [f"{type(exc).__name__}: {str(exc).splitlines()[0]}"])[-1]
            raise Skipped(f"the server did not start on {backend}: {reason}") from None
        with FluxClient(cluster.server_url) as client:
            client.register_file(write_workflow(home, SOURCE, "bench_workflows"))
            if "B1" in wanted:
                for runner in args.runners:
                    run.scenario(
                        f"{prefix['B1']}.{runner}",
                        lambda: b1_dispatch.run(cluster, client, runner, n["b1"], prefix=prefix["B1"]),
                    )
            if "B2" in wanted:
                for runner in args.runners:
                    run.scenario(
                        f"{prefix['B2']}.{runner}",
                        lambda: b2_throughput.run(
                            cluster, client, runner, n["b2_repeats"], prefix=prefix["B2"], settle=n["b2_settle_s"]
                        ),
                    )
    finally:
        cluster.close()


def budget(run: Run, home: Path, database_url: str | None) -> list[Figure]:
    """B1's latency budget (``bench.b1_budget``), printed as a table once measured."""
    figures = b1_budget.budget(home, database_url, 20 if run.args.quick else 100)
    print(b1_budget.table(figures), flush=True)
    return figures


def backend_of(url: str | None) -> str:
    if not url:
        return "sqlite"
    scheme = url.split(":", 1)[0].split("+", 1)[0]
    return "postgresql" if scheme in ("postgres", "postgresql") else scheme


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    t0 = time.monotonic()
    wanted = set(args.only)
    run = Run(args)
    machine = machine_facts()
    tmp = Path(tempfile.mkdtemp(prefix="flux-bench-"))
    backend = backend_of(args.database_url)
    print(
        f"Flux benchmarks ({'quick' if args.quick else 'full'}): {', '.join(args.only)}; "
        f"B1/B2 on {backend}; work folder {tmp}",
        flush=True,
    )
    print(f"{'name':<48} {'median':>10} {'p95':>10}  unit", flush=True)
    try:
        if wanted & {"B1", "B2"}:
            run.scenario(
                "B1/B2 cluster",
                lambda: (
                    cluster_scenarios(
                        run,
                        tmp / "cluster",
                        args.database_url,
                        backend,
                        wanted & {"B1", "B2"},
                        {"B1": "B1", "B2": "B2"},
                    )
                    or []
                ),
            )
        if "B1" in wanted:
            run.scenario("B1.diag", lambda: b1_dispatch.handover(args.quick))
            if "subprocess" in args.runners:
                run.scenario("B1.budget", lambda: budget(run, tmp / "budget", args.database_url))
        if "B3" in wanted:
            run.scenario("B3", lambda: b3_replay.run(args.quick))
        if "B5" in wanted:
            run.scenario("B5", lambda: b5_matching.run(args.quick))
        if "B6" in wanted:

            def b6() -> list[Figure]:
                with b6_postgres.scratch_database(args.pg_url) as (url, note):
                    print(f"B6: {note}", flush=True)
                    run.scenarios.setdefault("B6", {})["database"] = note
                    cluster_scenarios(
                        run, tmp / "postgres", url, "postgresql", {"B1", "B2"}, {"B1": "B6.pg.B1", "B2": "B6.pg.B2"}
                    )
                return []

            run.scenario("B6", b6)
            run.scenario("B6.burst", lambda: b6_burst.run(args.pg_url, tmp / "burst", *b6_burst.counts(args.quick)))
        if "B7" in wanted:
            b7_options = b7_fleet.options_from(args, prefix="b7-")
            run.scenarios.setdefault("B7", {})["options"] = dict(b7_options.__dict__)
            try:
                for key, fn in b7_fleet.units(b7_options, tmp / "b7"):
                    run.scenario(key, fn)
            finally:
                b7_fleet.stop_all()
    except KeyboardInterrupt:
        print("interrupted: recording what was measured", flush=True)
    finally:
        if args.keep:
            print(f"logs kept in {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    duration = time.monotonic() - t0
    record = {
        "suite": "flux-bench",
        "issue": 7,
        "started_at": started.isoformat(timespec="seconds"),
        "duration_s": round(duration, 1),
        "mode": "quick" if args.quick else "full",
        "quick": args.quick,
        "only": args.only,
        "backend": backend,
        "database_url": redact_url(args.database_url) if args.database_url else "sqlite (temporary file)",
        "b6_pg_url": redact_url(args.pg_url) if "B6" in wanted else None,
        **commit_facts(),
        "machine": {**machine, "load_average_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None},
        "counts": counts(args.quick and not args.full_counts),
        "runners": args.runners,
        "notes": args.note,
        "profiled": str(args.profile) if args.profile else None,
        "scenarios": run.scenarios,
        "figures": [figure.record() for figure in run.figures],
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{started.strftime('%Y%m%dT%H%M%SZ')}{'-quick' if args.quick else ''}"
    path, n = args.results_dir / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = args.results_dir / f"{stem}-{n}.json"
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    missed = [f.name for f in run.figures if f.met is False]
    print(f"done in {duration:.1f}s; record: {path}", flush=True)
    if missed:
        print(f"figures that miss their aim (recorded, not asserted): {', '.join(missed)}", flush=True)
    problems = [k for k, v in run.scenarios.items() if v.get("status") == "error"]
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
