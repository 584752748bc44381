"""CI smoke for the fleet benchmark (issue 22): ``python -m bench.b7_fleet --quick``
runs end to end against real processes. Figures are printed, never asserted: this
machine is noisy, and speed is measured by the benchmark, not by tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(240)
def test_b7_fleet_quick_runs_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bench.b7_fleet", "--quick", "--json", str(tmp_path / "b7.json")],
        cwd=REPO, capture_output=True, text=True, timeout=220,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("online_s", "idle_cpu_pct", "heartbeat_ms", "submit_to_claimed_ms", "runs_per_s", "evictions", "errors"):
        assert f"B7.sqlite.100.{name}" in result.stdout
    assert (tmp_path / "b7.json").exists()
