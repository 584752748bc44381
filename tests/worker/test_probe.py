"""flux.worker.probe against the worker-resources spec.

This machine has no GPU, driver, nvidia-smi or GPUtil: the tests that need one say so
in their names (``_with_fake_nvml``, ``_with_fake_gputil``: tests/fakes.py's modules
of the same API, handed to the probe; ``nvidia-smi`` found or not by ``shutil.which``).
Everything else (packages, runtime, cpu, memory, disk, the affinity mask, no driver)
is this machine's own."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from datetime import datetime

import pytest
from fakes import FakeGPUtil, FakeNVML, GiB, two_nvml_gpus
from hypothesis import given
from hypothesis import strategies as st

from flux.worker import probe

MiB = 1024**2


@pytest.fixture
def no_nvidia_smi(monkeypatch):
    monkeypatch.setattr(probe.shutil, "which", lambda cmd: None)


@pytest.fixture
def nvidia_smi_on_path(monkeypatch):
    monkeypatch.setattr(probe.shutil, "which", lambda cmd: f"/usr/bin/{cmd}")


def fake_gputil() -> FakeGPUtil:
    return FakeGPUtil(
        [
            {
                "id": 0,
                "uuid": "GPU-cccc",
                "name": "Tesla T4",
                "memoryTotal": 15360.0,
                "memoryFree": 15000.0,
                "load": 0.25,
            },
        ]
    )


@pytest.mark.parametrize("as_bytes", [False, True])
def test_spec_worker_publishes_each_gpu_with_memory_in_bytes_with_fake_nvml(as_bytes):
    nvml = two_nvml_gpus(as_bytes=as_bytes)
    gpus = probe.detect_gpus("nvml", nvml=nvml)
    assert gpus == [
        {
            "index": 0,
            "uuid": "GPU-aaaa",
            "name": "NVIDIA H100",
            "memory_total": 80 * GiB,
            "memory_available": 60 * GiB,
            "utilization": 37.0,
        },
        {
            "index": 1,
            "uuid": "GPU-bbbb",
            "name": "NVIDIA H100",
            "memory_total": 80 * GiB,
            "memory_available": 0,
            "utilization": 100.0,
        },
    ]
    assert all(isinstance(g["uuid"], str) and isinstance(g["name"], str) for g in gpus)
    assert isinstance(gpus[0]["utilization"], float)
    assert (nvml.init_calls, nvml.shutdown_calls) == (1, 1)


def test_spec_nvml_is_tried_first_in_auto_with_fake_nvml_and_gputil(nvidia_smi_on_path):
    gpus = probe.detect_gpus("auto", nvml=two_nvml_gpus(), gputil=fake_gputil())
    assert [g["uuid"] for g in gpus] == ["GPU-aaaa", "GPU-bbbb"]


def test_spec_no_driver_falls_back_to_gputil_when_nvidia_smi_on_path_with_fake_nvml_and_gputil(
    nvidia_smi_on_path, caplog
):
    caplog.set_level(logging.DEBUG, logger="flux.worker.probe")
    nvml = FakeNVML(init_error="Driver Not Loaded")
    gpus = probe.detect_gpus("auto", nvml=nvml, gputil=fake_gputil())
    assert gpus == [
        {
            "index": 0,
            "uuid": "GPU-cccc",
            "name": "Tesla T4",
            "memory_total": 15360 * MiB,
            "memory_available": 15000 * MiB,
            "utilization": 25.0,
        }
    ]
    assert "NVML init failed: Driver Not Loaded (no driver?)" in caplog.text
    assert nvml.shutdown_calls == 0


def test_spec_no_driver_and_no_nvidia_smi_means_no_detected_gpus_with_fake_nvml(no_nvidia_smi, caplog):
    caplog.set_level(logging.DEBUG, logger="flux.worker.probe")
    gpus = probe.detect_gpus("auto", nvml=FakeNVML(init_error="Driver Not Loaded"), gputil=fake_gputil())
    assert gpus == []
    assert "NVML init failed: Driver Not Loaded (no driver?)" in caplog.text
    assert "nvidia-smi not on PATH" in caplog.text
    assert all(r.levelno == logging.DEBUG and r.name == "flux.worker.probe" for r in caplog.records)


def test_spec_gputil_not_installed_means_no_detected_gpus(caplog):
    if importlib.util.find_spec("GPUtil") is not None:
        pytest.skip("GPUtil is installed on this machine")
    caplog.set_level(logging.DEBUG, logger="flux.worker.probe")
    assert probe.detect_gpus("gputil") == []
    assert "GPUtil not installed" in caplog.text


def test_spec_gputil_load_and_nan_fields_are_normalised_with_fake_gputil(nvidia_smi_on_path):
    gputil = FakeGPUtil(
        [
            {
                "id": 3,
                "uuid": "GPU-d",
                "name": "A10",
                "memoryTotal": float("nan"),
                "memoryFree": float("nan"),
                "load": float("nan"),
            }
        ]
    )
    (gpu,) = probe.detect_gpus("gputil", gputil=gputil)
    assert gpu["index"] == 3 and gpu["memory_total"] == 0 and gpu["utilization"] == 0.0


def test_spec_nvml_failure_mid_query_is_no_gpus_and_shuts_down_with_fake_nvml(no_nvidia_smi, caplog):
    caplog.set_level(logging.DEBUG, logger="flux.worker.probe")
    nvml = two_nvml_gpus()

    def broken(handle):
        raise nvml.NVMLError("GPU is lost")

    nvml.nvmlDeviceGetMemoryInfo = broken
    assert probe.detect_gpus("nvml", nvml=nvml) == []
    assert "NVML query failed: GPU is lost" in caplog.text
    assert nvml.shutdown_calls == 1


def test_spec_unsupported_utilization_does_not_hide_the_gpu_with_fake_nvml():
    nvml = two_nvml_gpus()

    def unsupported(handle):
        raise nvml.NVMLError("Not Supported")

    nvml.nvmlDeviceGetUtilizationRates = unsupported
    gpus = probe.detect_gpus("nvml", nvml=nvml)
    assert len(gpus) == 2 and all(g["utilization"] == 0.0 for g in gpus)


def test_spec_source_none_detects_nothing_with_fake_nvml_and_gputil(nvidia_smi_on_path):
    nvml = two_nvml_gpus()
    assert probe.detect_gpus("none", nvml=nvml, gputil=fake_gputil()) == []
    assert nvml.init_calls == 0


def test_spec_nvml_source_does_not_fall_back_with_fake_nvml_and_gputil(nvidia_smi_on_path):
    assert probe.detect_gpus("nvml", nvml=FakeNVML(init_error="x"), gputil=fake_gputil()) == []


def test_unknown_source_detects_nothing_without_raising_with_fake_nvml():
    assert probe.detect_gpus("rocm", nvml=two_nvml_gpus()) == []


def test_spec_no_driver_means_no_detected_gpus_on_this_machine():
    # Real pynvml, no NVIDIA driver here: must return [] and never raise.
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has an NVIDIA driver")
    assert probe.detect_gpus("auto") == []
    assert probe.detect_gpus("nvml") == []


def test_spec_packages_are_published_with_canonical_names():
    packages = probe.installed_packages()
    assert "psutil" in packages and "packaging" in packages
    assert packages["flux-engine"]
    assert all(name == name.lower() and "_" not in name and "." not in name for name in packages)


def test_spec_package_names_are_pep503_canonicalised(tmp_path, monkeypatch):
    """Distributions installed in a folder put first on sys.path, as importlib.metadata finds them."""

    def install(folder: str, header: str) -> None:  # its METADATA: header lines, a blank line, the description
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "METADATA").write_text(header + "\nName: not-a-header\n")

    install("Flux_Engine-1.0.dist-info", "Metadata-Version: 2.1\nName: Flux_Engine\nVersion: 1.0\n")
    install("nameless-9.dist-info", "Metadata-Version: 2.1\nVersion: 9\n")
    install("zope.interface-6.0.dist-info", "Metadata-Version: 2.1\nName: zope.interface\nVersion: 6.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    packages = probe.installed_packages()
    assert packages["zope-interface"] == "6.0"
    assert packages["flux-engine"] == "1.0"  # first on sys.path wins over the installed flux-engine
    assert "not-a-header" not in packages and "" not in packages


def test_spec_runtime_info_shape():
    info = probe.runtime_info()
    assert set(info) == {"python_version", "os_name", "os_version", "hostname", "cpu_arch"}
    assert info["python_version"].startswith("3.")
    assert all(isinstance(v, str) for v in info.values())


def test_spec_worker_publishes_cpu_memory_disk_capacity():
    r = probe.sample_resources(gpu_source="none")
    assert r["cpu_total"] > 0 and 0 < r["cpu_available"] <= r["cpu_total"]
    assert isinstance(r["cpu_available"], float)
    assert 0 <= r["cpu_percent"] <= 100
    assert 0 < r["memory_available"] <= r["memory_total"]
    assert 0 < r["disk_free"] <= r["disk_total"]
    assert r["gpus"] == []
    assert datetime.fromisoformat(r["sampled_at"]).utcoffset().total_seconds() == 0


def test_spec_cpu_available_is_the_affinity_mask():
    """A process pinned to one core (as ``taskset`` or a cpuset pins it) publishes 1 cpu available."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity")
    pinned = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); from flux.worker import probe; "
        "print(probe.sample_resources(gpu_source='none')['cpu_available'])"
    )
    result = subprocess.run([sys.executable, "-c", pinned], capture_output=True, text=True, timeout=60, check=True)
    assert float(result.stdout) == 1.0


def test_spec_sample_resources_passes_gpus_through_with_fake_nvml():
    r = probe.sample_resources(nvml=two_nvml_gpus())
    assert [g["index"] for g in r["gpus"]] == [0, 1]


def test_spec_registration_payload_shape():
    info = probe.get_resources_info({"region": "eu"}, max_concurrent_executions=3, gpu_source="none")
    assert set(info) == {"resources", "packages", "runtime", "labels", "max_concurrent_executions"}
    assert info["labels"] == {"region": "eu"} and info["max_concurrent_executions"] == 3
    names = [p["name"] for p in info["packages"]]
    assert names == sorted(names) and "psutil" in names
    assert all(set(p) == {"name", "version"} for p in info["packages"])
    assert info["runtime"] == probe.runtime_info()
    assert probe.get_resources_info()["labels"] == {}


def test_worker_pinned_by_cuda_visible_devices_advertises_only_its_cards():
    """One worker per GPU (the spec's layout): NVML sees all cards, the worker publishes its own."""
    gpus = [{"index": 0, "uuid": "GPU-aaaa"}, {"index": 1, "uuid": "GPU-bbbb"}, {"index": 2, "uuid": "GPU-cccc"}]
    assert probe.visible(gpus, None) == gpus
    assert probe.visible(gpus, "1") == [gpus[1]]
    assert probe.visible(gpus, "GPU-cc,0") == [gpus[2], gpus[0]]
    assert probe.visible(gpus, "-1") == []
    assert probe.visible(gpus, "0,7,1") == [gpus[0]]  # CUDA stops at the first unknown entry


@given(st.text(alphabet=st.sampled_from("abcXYZ019-_.~ "), max_size=20))
def test_canonical_names_are_packagings(name):
    """The probe's PEP 503 normalization is packaging's, without importing packaging."""
    from packaging.utils import canonicalize_name

    assert probe.canonical_name(name) == canonicalize_name(name)


def test_a_sampler_that_found_no_gpu_looks_again_only_after_gpu_retry_with_fake_nvml_and_clock(monkeypatch):
    nvml = FakeNVML(init_error="Driver Not Loaded")
    sampler = probe.Sampler(gpu_source="nvml", gpu_retry=60.0)
    assert sampler.reads_devices()
    assert sampler.sample(nvml=nvml)["gpus"] == [] and nvml.init_calls == 1
    assert not sampler.reads_devices()  # the heartbeat samples on its loop, no thread
    assert sampler.sample(nvml=nvml)["gpus"] == [] and nvml.init_calls == 1
    clock = probe.time.monotonic() + 61.0
    monkeypatch.setattr(probe.time, "monotonic", lambda: clock)
    assert sampler.reads_devices()
    sampler.sample(nvml=nvml)
    assert nvml.init_calls == 2


def test_a_sampler_with_gpus_reads_them_on_every_sample_with_fake_nvml():
    nvml = two_nvml_gpus()
    sampler = probe.Sampler(gpu_source="nvml", gpu_retry=60.0)
    for _ in range(3):
        assert len(sampler.sample(nvml=nvml)["gpus"]) == 2
        assert sampler.reads_devices()
    assert nvml.init_calls == 3


def test_a_sampler_without_gpu_source_never_asks_a_driver():
    assert not probe.Sampler(gpu_source="none").reads_devices()


def test_a_sampler_reads_the_same_figures_as_a_fresh_sample(tmp_path):
    sampler = probe.Sampler(str(tmp_path), "none")
    kept, fresh = sampler.sample(), probe.sample_resources(str(tmp_path), "none")
    assert kept["cpu_total"] == fresh["cpu_total"] and kept["memory_total"] == fresh["memory_total"]
    assert kept["disk_total"] == fresh["disk_total"]
