"""CI smoke for the fleet benchmark (issue 22), the chaos benchmark (issue 13), the schedules
benchmark (issue 17), the bundles benchmark (issue 15) and the history, footprint and payload
benchmarks (issue 18): ``python -m bench.b7_fleet --quick``, ``python -m bench.b8_chaos --quick``
and the others run end to end against real processes. Speed figures are printed, never asserted: this machine is
noisy, and speed is measured by the benchmark, not by tests. B8's correctness figures
(no run lost, no recorded task run again, no write from a fenced attempt) are counts, not
timings, and are asserted; so is B10's count of fires (every due time once)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

#: Each runs a benchmark end to end (15-40 s): CI's second step (``pytest -m slow``).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(240)
def test_b7_fleet_quick_runs_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bench.b7_fleet", "--quick", "--json", str(tmp_path / "b7.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=220,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stderr[-3000:]
    for name in (
        "online_s",
        "idle_cpu_pct",
        "heartbeat_ms",
        "submit_to_claimed_ms",
        "runs_per_s",
        "evictions",
        "errors",
    ):
        assert f"B7.sqlite.100.{name}" in result.stdout
    assert (tmp_path / "b7.json").exists()


@pytest.mark.timeout(420)
def test_b8_chaos_quick_runs_end_to_end(tmp_path):
    # About 20 s; up to 2 x 180 s drain deadlines if runs get stuck. On a timeout, SIGTERM
    # (b8 takes it as Ctrl-C and stops its server and workers) rather than subprocess.run's SIGKILL.
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.b8_chaos", "--quick", "--json", str(tmp_path / "b8.json")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
        pytest.fail(f"b8 --quick ran past 300 s:\n{stdout[-4000:]}\n{stderr[-3000:]}")
    print(stdout[-4000:])
    assert process.returncode == 0, stderr[-3000:]
    for name in ("runs_completed", "runs_lost", "completed_tasks_reexecuted", "fenced_writes"):
        assert f"B8.{name} " in stdout
    assert (tmp_path / "b8.json").exists()
    figures = {f["name"]: f for f in json.loads((tmp_path / "b8.json").read_text())["figures"]}
    for name in ("runs_lost", "completed_tasks_reexecuted", "fenced_writes"):
        assert figures[f"B8.{name}"]["median"] == 0, figures[f"B8.{name}"]["note"]


@pytest.mark.timeout(240)
def test_b11_bundles_quick_runs_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bench.b11_bundles", "--quick", "--json", str(tmp_path / "b11.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=220,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("register_s", "cold_run_s", "warm_run_s"):
        assert f"B11.{name}" in result.stdout
    assert (tmp_path / "b11.json").exists()


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("module", "args", "names"),
    [
        (
            "bench.b12_history",
            ("--sizes", "0,500"),
            ("B12.sqlite.500.list_ms", "B12.sqlite.500.submit_completed_listing_ms"),
        ),
        (
            "bench.b13_footprint",
            ("--slots", "4", "--workers", "4"),
            ("B13.idle.pss_mib", "B13.after_idle_timeout.pss_mib", "B13.start_up.4_import_floor_s"),
        ),
        ("bench.b14_payloads", (), ("B14.1MiB.stored_copies", "B14.over_limit.refused_ms")),
        ("bench.b16_tasks", (), ("B16.cache_hit.added_per_call_ms", "B16.secrets.added_per_call_ms")),
    ],
)
def test_issue_18_benchmarks_quick_run_end_to_end(tmp_path, module, args, names):
    """B12 history, B13 worker footprint, B14 payloads (issue 18's B8, B9, B10)."""
    result = subprocess.run(
        [sys.executable, "-m", module, "--quick", *args, "--json", str(tmp_path / "out.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stderr[-3000:]
    for name in names:
        assert name in result.stdout
    assert json.loads((tmp_path / "out.json").read_text())


@pytest.mark.timeout(120)
def test_b10_schedules_quick_runs_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bench.b10_schedules", "--quick", "--json", str(tmp_path / "b10.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=100,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("create_schedules_per_s", "fires", "fire_lateness_ms", "round_s", "server_cpu_pct"):
        assert f"B10.{name} " in result.stdout
    figures = {f["name"]: f for f in json.loads((tmp_path / "b10.json").read_text())}
    assert figures["B10.fires"]["met"], figures["B10.fires"]["note"]  # a count, not a timing: every due time fired once


@pytest.mark.timeout(120)
def test_b19_gpu_quick_runs_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bench.b19_gpu", "--quick", "--json", str(tmp_path / "b19.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=100,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("B19.cost_ratio_mix_vs_gpu_n", "B19.packing_efficiency"):
        assert name in result.stdout
    assert json.loads((tmp_path / "b19.json").read_text())


@pytest.mark.timeout(240)
def test_b17_contention_quick_runs_end_to_end(tmp_path):
    """Issue 34's B17: preemption, fair share, a quota, and a round's placement cost."""
    result = subprocess.run(
        [sys.executable, "-m", "bench.b17_contention", "--quick", "--json", str(tmp_path / "b17.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=220,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stderr[-3000:]
    figures = {f["name"]: f for f in json.loads((tmp_path / "b17.json").read_text())["figures"]}
    for name in (
        "preemption.high_submit_to_started_s",
        "fair_share.big_40_share_pct",
        "round.2000x200.free_fleet.contended_ms",
        "round.2000x200.full_fleet.contended_ms",
        "round.2000x200.full_fleet.p99_ratio",
    ):
        assert f"B17.{name}" in figures
    # counts, not timings: nothing completed runs again, every preempted execution completes, no sample over quota
    for name in (
        "preemption.completed_tasks_rerun",
        "preemption.preempted_completed_later",
        "preemption.low_completed",
        "quota.samples_over_quota",
    ):
        assert figures[f"B17.{name}"]["met"], figures[f"B17.{name}"]


@pytest.mark.timeout(240)
def test_b18_autoscale_quick_runs_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bench.b18_autoscale", "--quick", "--json", str(tmp_path / "b18.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=220,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stderr[-3000:]
    for name in (
        "unfit_workers_started",
        "first_start_s",
        "makespan_s",
        "back_to_min_s",
        "static_makespan_s",
        "makespan_ratio",
    ):
        assert f"B18.{name} " in result.stdout
    figures = {f["name"]: f for f in json.loads((tmp_path / "b18.json").read_text())}
    for count in ("B18.unfit_workers_started", "B18.lost", "B18.run_twice"):  # counts, not timings
        assert figures[count]["median"] == 0, figures[count]
