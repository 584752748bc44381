"""What a worker offers is visible (issue 50.8): its INFO line at registration (cpu,
memory, disk, slots, GPUs and why none), the gpus column of ``worker list`` and the
``gpu`` line of ``worker show``. Real server and worker processes; GPUs only through
the tests' fake NVML binding (this machine has none), as the test names say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TESTS = Path(__file__).resolve().parents[1]


def offers(cluster, name: str) -> str:
    return next(line for line in cluster.log(f"worker-{name}").splitlines() if f"worker {name} offers " in line)


def flux(cluster, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLUX_")}
    env.update(COLUMNS="120", FLUX_SERVER_URL=cluster.server_url)
    done = subprocess.run([sys.executable, "-m", "flux", *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_each_worker_logs_what_it_offers_and_why_it_has_no_gpu_with_fake_nvml(cluster, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    cluster.start_worker("gpu-box", extra_args=("--gpu-source", "nvml:fakes:TWO_FREE_GPUS", "--resource", "fpga=2"))
    cluster.start_worker("probed", extra_args=("--gpu-source", "auto"))  # this machine's own NVML: no driver
    cluster.start_worker("off")  # --gpu-source none, as every test worker

    line = offers(cluster, "gpu-box")
    assert " INFO " in line
    assert re.search(r"cpu \d+ \(\d+ usable\), memory [\d.]+ GiB \([\d.]+ GiB available\), disk [\d.]+ GiB", line)
    assert "fpga 2, slots 4, GPUs: 2 x Fake H100 (80.0 GiB)" in line
    assert "GPUs: none (GPU detection disabled (--gpu-source none))" in offers(cluster, "off")
    probed = offers(cluster, "probed")
    assert "GPUs: none (NVML: " in probed and "GPUtil" in probed  # the reason of each way tried

    listed = flux(cluster, "worker", "list")
    header = [part.strip() for part in listed.splitlines()[1].split("┃")[1:-1]]
    rows = {
        cells[0]: dict(zip(header, cells))
        for line in listed.splitlines()
        if line.startswith("│") and (cells := [c.strip() for c in line.split("│")[1:-1]])[0]
    }
    assert rows["gpu-box"]["gpus"] == "2" and rows["off"]["gpus"] == "-"
    assert "flux.gpu/" not in listed  # the device labels are worker show's; the count says enough here
    shown = flux(cluster, "worker", "show", "gpu-box").splitlines()
    assert "gpu         2 x Fake H100" in shown and any(line.startswith("gpu 0 ") for line in shown)
    off = flux(cluster, "worker", "show", "off").splitlines()
    assert "gpu         none (the worker's log says why: its 'offers' line at registration)" in off
