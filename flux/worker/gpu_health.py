"""GPU health from NVML: XID errors, uncorrectable ECC errors, retired pages and row remapping.

What NVIDIA's Kubernetes device plugin and DCGM watch, read on every resource sample:

* XID errors, as NVML events (``nvmlEventTypeXidCriticalError``). The ones an
  application causes itself (13 graphics engine exception, 31 MMU fault, 43 stopped
  channel, 45 preemptive cleanup, 68 video decoder, 109 context switch timeout) are
  not the card's fault and are ignored, as the device plugin does. Any other XID marks
  the card unhealthy for ``XID_HOLD`` seconds after the last one: NVML never says an
  XID is over, so a card is seen healthy again when it has been quiet that long.
* Uncorrectable (double-bit) ECC errors since the last driver reload.
* Retired pages waiting for a reset, or ``RETIRED_PAGES_LIMIT`` pages retired; on
  cards that remap rows instead (A100 and later), a remapping failure.

Each check that a card does not support (``NVML_ERROR_NOT_SUPPORTED``) is skipped.
The verdict is a short reason ("XID 79", "3 uncorrectable ECC errors"), or None.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

logger = logging.getLogger("flux.worker.probe")

#: XIDs an application causes itself (NVIDIA's k8s-device-plugin skips the same ones).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
#: Seconds a card stays unhealthy after its last critical XID.
XID_HOLD = 600.0
#: NVIDIA's guidance: a card with this many retired pages should be replaced.
RETIRED_PAGES_LIMIT = 60
#: nvml constants (pynvml's values), read from the bindings when they have them.
_XID_EVENT, _UNCORRECTED, _VOLATILE, _DOUBLE_BIT, _TIMEOUT = 0x8, 1, 0, 1, 10


def _const(nvml: Any, name: str, default: int) -> int:
    return getattr(nvml, name, default)


class HealthWatch:
    """One per NVML binding and worker process: holds the XID event set between samples."""

    def __init__(self, nvml: Any, clock: Callable[[], float] = time.monotonic):
        self.nvml, self.clock = nvml, clock
        self._events: Any = None
        self._registered: set[str] = set()
        #: uuid -> (reason, when the card may be seen healthy again)
        self._xids: dict[str, tuple[str, float]] = {}

    def watch(self, handle: Any, uuid: str) -> None:
        """Register a card for XID events (once); a card that cannot be watched is still sampled."""
        if uuid in self._registered:
            return
        self._registered.add(uuid)
        nvml = self.nvml
        try:
            if self._events is None:
                self._events = nvml.nvmlEventSetCreate()
                nvml.nvmlInit()  # held for the process: the event set lives as long as NVML does
            nvml.nvmlDeviceRegisterEvents(
                handle, _const(nvml, "nvmlEventTypeXidCriticalError", _XID_EVENT), self._events
            )
        except Exception as exc:  # NOT_SUPPORTED (e.g. some virtualised cards), or a binding without events
            logger.debug("GPU %s: XID events unavailable: %s", uuid, exc)

    def poll(self, uuid_of: Callable[[Any], str]) -> None:
        """Drain the XID events that arrived since the last sample."""
        if self._events is None:
            return
        while True:
            try:
                event = self.nvml.nvmlEventSetWait(self._events, 0)
            except Exception:  # NVML_ERROR_TIMEOUT: nothing more
                return
            xid = int(getattr(event, "eventData", 0))
            if xid in APPLICATION_XIDS:
                continue
            uuid = uuid_of(event.device)
            logger.warning("GPU %s: XID %d: marked unhealthy for %.0fs", uuid, xid, XID_HOLD)
            self._xids[uuid] = (f"XID {xid}", self.clock() + XID_HOLD)

    def verdict(self, handle: Any, uuid: str) -> str | None:
        """Why this card is in trouble now, or None."""
        xid = self._xids.get(uuid)
        if xid is not None:
            if self.clock() < xid[1]:
                return xid[0]
            del self._xids[uuid]
        for check in (_ecc, _retired_pages, _remapped_rows):
            try:
                reason = check(self.nvml, handle)
            except Exception:  # NOT_SUPPORTED: this card has no such counter
                continue
            if reason:
                return reason
        return None


def _ecc(nvml: Any, handle: Any) -> str | None:
    errors = int(
        nvml.nvmlDeviceGetTotalEccErrors(
            handle,
            _const(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", _UNCORRECTED),
            _const(nvml, "NVML_VOLATILE_ECC", _VOLATILE),
        )
    )
    return f"{errors} uncorrectable ECC errors" if errors > 0 else None


def _retired_pages(nvml: Any, handle: Any) -> str | None:
    if int(nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle)):
        return "retired pages pending (needs a reset)"
    cause = _const(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", _DOUBLE_BIT)
    retired = len(nvml.nvmlDeviceGetRetiredPages(handle, cause))
    return f"{retired} retired pages (limit {RETIRED_PAGES_LIMIT})" if retired >= RETIRED_PAGES_LIMIT else None


def _remapped_rows(nvml: Any, handle: Any) -> str | None:
    remapped = nvml.nvmlDeviceGetRemappedRows(handle)  # (correctable, uncorrectable, pending, failed)
    return "row remapping failed" if remapped[3] else None
