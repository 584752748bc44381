"""scripts/gpu_check.py, the hardware check, run here against fake NVML bindings (no GPU on this machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_gpu_check_script_passes_on_two_cards_fake_nvml():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    result = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--gpu-source", "nvml:fakes:TWO_FAKE_H200", "--timeout", "60"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=190,
        env=env,
    )
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(lines[0])
    assert result.returncode == 0 and report["passed"], report
    assert {"probe", "labels", "health", "whole_gpu", "half_gpus", "allocate_1gib", "under_3_minutes"} <= set(
        report["items"]
    )
    assert report["items"]["half_gpus"]["shared_one_card"] is True
