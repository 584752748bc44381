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
ONE_FREE_GPU = FakeNVML([{"uuid": "GPU-fake-solo", "name": "Fake A100", "total": 40 * GiB, "free": 40 * GiB, "util": 0}])
