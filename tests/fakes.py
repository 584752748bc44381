"""Reusable test doubles (no real GPU or driver needed)."""

from __future__ import annotations

from types import SimpleNamespace

GiB = 1024**3


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError."""


class FakeNVML:
    """A fake NVML module (the pynvml API subset flux.worker.probe uses).

    gpus: dicts with uuid, name, total, free (bytes) and util (percent).
    as_bytes: return uuid/name as bytes, like old pynvml bindings.
    init_error: message of a FakeNVMLError raised by nvmlInit (e.g. no driver).
    """

    NVMLError = FakeNVMLError

    def __init__(self, gpus=(), *, as_bytes=False, init_error=None):
        self.gpus = [dict(g) for g in gpus]
        self.as_bytes = as_bytes
        self.init_error = init_error
        self.init_calls = 0
        self.shutdown_calls = 0

    def _s(self, value):
        return value.encode() if self.as_bytes else value

    def nvmlInit(self):
        self.init_calls += 1
        if self.init_error:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetUUID(self, h):
        return self._s(h["uuid"])

    def nvmlDeviceGetName(self, h):
        return self._s(h["name"])

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=h["total"], free=h["free"], used=h["total"] - h["free"])

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=h["util"], memory=0)


class FakeNVMLDevices(FakeNVML):
    """A fake NVML with what devices and health need: compute capability, the driver,
    MIG slices, and XID and ECC errors injected by tests (or by a file another process writes).

    gpus: as FakeNVML's, plus ``cc`` ((9, 0)), ``mig`` (a list of slices, each a dict
    with uuid, name ("... MIG 1g.10gb"), total, free, util) and ``ecc`` (uncorrectable errors).
    events: a JSON file of injected faults, read on every call ({"xid": {uuid: 79},
    "ecc": {uuid: 2}}): how a test reaches a worker process's fake.
    """

    def __init__(self, gpus=(), *, events=None, **kwargs):
        super().__init__(gpus, **kwargs)
        self.events_path = events
        self.pending_xids: list[tuple[str, int]] = []
        self.seen_xids: set[str] = set()

    def inject_xid(self, uuid, xid):
        self.pending_xids.append((uuid, xid))

    def _faults(self):
        import json
        import os

        path = self.events_path or os.environ.get("FLUX_FAKE_NVML_EVENTS")
        if not path or not os.path.exists(path):
            return {}
        with open(path) as stream:
            return json.load(stream)

    def nvmlSystemGetDriverVersion(self):
        return self._s("550.54.15")

    def nvmlDeviceGetCudaComputeCapability(self, h):
        if "cc" not in h:
            raise FakeNVMLError("Not Supported")
        return h["cc"]

    def nvmlDeviceGetMigMode(self, h):
        return (1, 1) if h.get("mig") else (0, 0)

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return 7 if h.get("mig") else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, i):
        slices = h.get("mig") or []
        if i >= len(slices):
            raise FakeNVMLError("Not Found")
        return slices[i]

    def nvmlEventSetCreate(self):
        return "fake-event-set"

    def nvmlDeviceRegisterEvents(self, h, types, event_set):
        pass

    def nvmlEventSetWait(self, event_set, timeout_ms):
        for uuid, xid in self._faults().get("xid", {}).items():
            if uuid not in self.seen_xids:
                self.seen_xids.add(uuid)
                self.pending_xids.append((uuid, xid))
        if not self.pending_xids:
            raise FakeNVMLError("Timeout")
        uuid, xid = self.pending_xids.pop(0)
        device = next(g for g in self.gpus if g["uuid"] == uuid)
        return SimpleNamespace(device=device, eventType=0x8, eventData=xid)

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter_type):
        return self._faults().get("ecc", {}).get(h["uuid"], h.get("ecc", 0))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return 0

    def nvmlDeviceGetRetiredPages(self, h, cause):
        return [0] * h.get("retired", 0)

    def nvmlDeviceGetRemappedRows(self, h):
        raise FakeNVMLError("Not Supported")


class FakeGPUtil:
    """A fake GPUtil module: getGPUs() with MiB memory and 0..1 load."""

    def __init__(self, gpus=()):
        self.gpus = [SimpleNamespace(**g) for g in gpus]

    def getGPUs(self):
        return list(self.gpus)


def two_nvml_gpus(**kwargs) -> FakeNVML:
    return FakeNVML(
        [
            {"uuid": "GPU-aaaa", "name": "NVIDIA H100", "total": 80 * GiB, "free": 60 * GiB, "util": 37},
            {"uuid": "GPU-bbbb", "name": "NVIDIA H100", "total": 80 * GiB, "free": 0, "util": 100},
        ],
        **kwargs,
    )


#: Loaded by worker processes in tests through ``--gpu-source nvml:fakes:TWO_FREE_GPUS``.
TWO_FREE_GPUS = FakeNVML(
    [
        {"uuid": "GPU-fake-0", "name": "Fake H100", "total": 80 * GiB, "free": 80 * GiB, "util": 0},
        {"uuid": "GPU-fake-1", "name": "Fake H100", "total": 80 * GiB, "free": 80 * GiB, "util": 0},
    ]
)

#: A one-GPU worker (``--gpu-source nvml:fakes:ONE_FREE_GPU``).
ONE_FREE_GPU = FakeNVML(
    [{"uuid": "GPU-fake-solo", "name": "Fake A100", "total": 40 * GiB, "free": 40 * GiB, "util": 0}]
)


def _card(uuid, *, name="NVIDIA H200", gib=141, cc=(9, 0), **more):
    return {"uuid": uuid, "name": name, "total": gib * GiB, "free": gib * GiB, "util": 0, "cc": cc, **more}


#: Two whole H200s (``--gpu-source nvml:fakes:TWO_FAKE_H200``), faults injected through
#: the JSON file named by ``FLUX_FAKE_NVML_EVENTS``.
TWO_FAKE_H200 = FakeNVMLDevices([_card("GPU-fake-h200-0"), _card("GPU-fake-h200-1")])

#: An A100 split into three MIG slices, and a whole A100 beside it.
FAKE_MIG_A100 = FakeNVMLDevices(
    [
        _card(
            "GPU-fake-a100-mig",
            name="NVIDIA A100-SXM4-80GB",
            gib=80,
            cc=(8, 0),
            mig=[
                {
                    "uuid": f"MIG-fake-{i}",
                    "name": "NVIDIA A100-SXM4-80GB MIG 1g.10gb",
                    "total": 10 * GiB,
                    "free": 10 * GiB,
                    "util": 0,
                }
                for i in range(3)
            ],
        ),
        _card("GPU-fake-a100-whole", name="NVIDIA A100-SXM4-80GB", gib=80, cc=(8, 0)),
    ]
)
