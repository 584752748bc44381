"""The probe's devices, labels and health through fake NVML bindings (no GPU on this machine)."""

from __future__ import annotations

import json

from fakes import FAKE_MIG_A100, FakeNVMLDevices, GiB, _card

from flux.domain.devices import gpu_labels
from flux.worker import gpu_health, nvml_devices, probe
from flux.worker.gpu_health import HealthWatch


def test_cards_publish_compute_capability_and_labels_fake_nvml():
    nvml = FakeNVMLDevices([_card("GPU-a"), _card("GPU-b", cc=(8, 6), gib=80)])
    gpus = probe.detect_gpus("nvml", nvml=nvml)
    assert [(g["uuid"], g["compute_capability"]) for g in gpus] == [("GPU-a", "9.0"), ("GPU-b", "8.6")]
    assert "unhealthy" not in gpus[0] and "mig" not in gpus[0]
    assert gpu_labels(gpus, "550.54.15") == {
        "flux.gpu/model": "NVIDIA-H200",
        "flux.gpu/memory": "80",
        "flux.gpu/compute-capability": "8.6",
        "flux.gpu/driver": "550.54.15",
        "flux.gpu/mig": "false",
    }


def test_registration_labels_come_from_the_devices_and_the_given_labels_win_fake_nvml(monkeypatch):
    monkeypatch.setattr("fakes.TWO_FAKE_H200.events_path", None)
    info = probe.get_resources_info({"flux.gpu/model": "mine", "pool": "a"}, gpu_source="nvml:fakes:TWO_FAKE_H200")
    assert info["labels"]["flux.gpu/compute-capability"] == "9.0"
    assert info["labels"]["flux.gpu/driver"] == "550.54.15"
    assert info["labels"]["flux.gpu/memory"] == "141"
    assert (info["labels"]["flux.gpu/model"], info["labels"]["pool"]) == ("mine", "a")


def test_mig_slices_are_devices_of_their_own_after_the_cards_fake_nvml():
    gpus = probe.detect_gpus("nvml", nvml=FAKE_MIG_A100)
    card, whole, *slices = gpus
    assert card["mig"] is True and "mig" not in whole
    assert [(s["index"], s["uuid"], s["mig_profile"], s["parent"], s["memory_total"]) for s in slices] == [
        (2 + i, f"MIG-fake-{i}", "1g.10gb", "GPU-fake-a100-mig", 10 * GiB) for i in range(3)
    ]
    labels = gpu_labels(gpus)
    assert (labels["flux.gpu/mig"], labels["flux.gpu/mig-profile"]) == ("true", "1g.10gb")


def test_critical_xid_marks_a_card_unhealthy_until_it_has_been_quiet_fake_nvml():
    nvml = FakeNVMLDevices([_card("GPU-a"), _card("GPU-b")])
    now = [0.0]
    nvml_devices._WATCHES[id(nvml)] = HealthWatch(nvml, clock=lambda: now[0])
    assert all("unhealthy" not in g for g in probe.detect_gpus("nvml", nvml=nvml))
    nvml.inject_xid("GPU-b", 13)  # an application's own fault: not the card's
    nvml.inject_xid("GPU-b", 79)  # fallen off the bus
    gpus = probe.detect_gpus("nvml", nvml=nvml)
    assert [g.get("unhealthy") for g in gpus] == [None, "XID 79"]
    now[0] += gpu_health.XID_HOLD - 1
    assert probe.detect_gpus("nvml", nvml=nvml)[1]["unhealthy"] == "XID 79"
    now[0] += 2
    assert "unhealthy" not in probe.detect_gpus("nvml", nvml=nvml)[1]


def test_uncorrectable_ecc_and_retired_pages_mark_a_card_unhealthy_fake_nvml(tmp_path):
    events = tmp_path / "faults.json"
    nvml = FakeNVMLDevices([_card("GPU-a"), _card("GPU-b", retired=gpu_health.RETIRED_PAGES_LIMIT)], events=str(events))
    events.write_text(json.dumps({"ecc": {"GPU-a": 2}}))
    gpus = probe.detect_gpus("nvml", nvml=nvml)
    assert [g.get("unhealthy") for g in gpus] == ["2 uncorrectable ECC errors", "60 retired pages (limit 60)"]
    events.write_text(json.dumps({}))
    assert "unhealthy" not in probe.detect_gpus("nvml", nvml=nvml)[0]


def test_plain_bindings_without_devices_api_still_probe_fake_nvml():
    """Bindings with only the old calls (no events, MIG or ECC): cards as before, no extra init."""
    from fakes import two_nvml_gpus

    nvml = two_nvml_gpus()
    gpus = probe.detect_gpus("nvml", nvml=nvml)
    assert set(gpus[0]) == {"index", "uuid", "name", "memory_total", "memory_available", "utilization"}
    assert (nvml.init_calls, nvml.shutdown_calls) == (1, 1)


def test_a_worker_pinned_to_one_mig_slice_publishes_it_as_its_own_device_fake_nvml(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-fake-1")
    (only,) = probe.detect_gpus("nvml", nvml=FAKE_MIG_A100)
    assert (only["uuid"], only["mig_profile"], only["parent"]) == ("MIG-fake-1", "1g.10gb", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # a card brings its slices; an index never names a slice
    assert [g["uuid"] for g in probe.detect_gpus("nvml", nvml=FAKE_MIG_A100)] == [
        "GPU-fake-a100-mig",
        "MIG-fake-0",
        "MIG-fake-1",
        "MIG-fake-2",
    ]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert probe.detect_gpus("nvml", nvml=FAKE_MIG_A100) == []
