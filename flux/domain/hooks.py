"""Webhooks as values (docs/hooks.md): the event types a hook subscribes to, one event
as the outbox stores it, the ``Flux-Signature`` header, the retry backoff, and which
addresses a hook may not reach. Pure: the server stores and sends, this decides.

The signature follows Stripe's form, ``t=<unix seconds>,v1=<hex HMAC-SHA256 of
"t.body">``: the timestamp is signed with the body, so a receiver can refuse a replay
older than a few minutes; ``v1`` leaves room for a second scheme during a rotation.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class HookEventType(StrEnum):
    EXECUTION_SCHEDULED = "execution.scheduled"
    EXECUTION_STARTED = "execution.started"
    EXECUTION_COMPLETED = "execution.completed"
    EXECUTION_FAILED = "execution.failed"
    EXECUTION_CANCELLED = "execution.cancelled"
    EXECUTION_TIMED_OUT = "execution.timed-out"
    #: Emitted by preemption (another feature) through ``flux.server.outbox.enqueue``.
    EXECUTION_PREEMPTED = "execution.preempted"
    #: No registered worker could ever run it, for the server's threshold (``outbox.unschedulable_overdue``).
    EXECUTION_UNSCHEDULABLE = "execution.unschedulable"
    SCHEDULE_MISSED = "schedule.missed"
    SCHEDULE_SKIPPED = "schedule.skipped"
    WORKER_ONLINE = "worker.online"
    WORKER_STALE = "worker.stale"
    WORKER_EVICTED = "worker.evicted"
    WORKER_DRAINED = "worker.drained"
    #: A worker's sample said a GPU became unhealthy (``resources.store_gpus``).
    DEVICE_UNHEALTHY = "device.unhealthy"
    #: ``flux hook test``: sent to one hook, whatever it subscribes to.
    HOOK_TEST = "hook.test"


#: Events about the fleet, which belongs to no namespace: a hook of any namespace may
#: subscribe to them (only operators manage hooks, and operators read the whole fleet).
FLEET_EVENTS = frozenset(
    {
        HookEventType.WORKER_ONLINE,
        HookEventType.WORKER_STALE,
        HookEventType.WORKER_EVICTED,
        HookEventType.WORKER_DRAINED,
        HookEventType.DEVICE_UNHEALTHY,
    }
)
#: What a hook may subscribe to (``hook.test`` is sent on demand only).
SUBSCRIBABLE = tuple(t for t in HookEventType if t is not HookEventType.HOOK_TEST)
#: The execution state -> the event its end sends.
ENDED = {
    "COMPLETED": HookEventType.EXECUTION_COMPLETED,
    "FAILED": HookEventType.EXECUTION_FAILED,
    "CANCELLED": HookEventType.EXECUTION_CANCELLED,
    "TIMED_OUT": HookEventType.EXECUTION_TIMED_OUT,
}


def parse_event_types(names: list[str] | tuple[str, ...]) -> list[HookEventType]:
    """Event names to types, in order, without repeats; ``ValueError`` naming the known ones."""
    known = {t.value: t for t in SUBSCRIBABLE}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown event(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    if not names:
        raise ValueError("a hook subscribes to at least one event")
    return list(dict.fromkeys(known[name] for name in names))


@dataclass(frozen=True)
class HookEvent:
    """One thing that happened, as the outbox stores it and the body carries it.

    ``subject`` is what its order is kept per (an execution's id, a worker's or a
    schedule's name): a hook gets a subject's events in the order they were enqueued.
    ``namespace`` is None for fleet events. ``workflow`` lets a hook filter by workflow."""

    type: HookEventType
    subject: str
    namespace: str | None
    data: dict[str, Any]
    workflow: str | None = None
    time: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if (self.namespace is None) != (self.type in FLEET_EVENTS):
            raise ValueError(f"{self.type.value}: fleet events have no namespace, the others have one")


@dataclass(frozen=True)
class Subscription:
    """A hook as matching sees it."""

    id: int
    namespace: str
    events: frozenset[HookEventType]
    workflow: str | None = None

    def wants(self, event: HookEvent) -> bool:
        if event.type not in self.events:
            return False
        if event.namespace is None:  # a fleet event: every namespace's hooks may take it
            return True
        return event.namespace == self.namespace and (self.workflow is None or self.workflow == event.workflow)


# --- signing -------------------------------------------------------------------------------

SIGNATURE_HEADER = "Flux-Signature"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Flux-Signature`` header's value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, header: str, body: bytes, tolerance: float = 300.0, now: float | None = None) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` within ``tolerance`` seconds of ``now``."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = signature(secret, timestamp, body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


# --- retries -------------------------------------------------------------------------------


def retry_delay(failures: int, base: float, cap: float, draw: float) -> float:
    """Seconds before the attempt after ``failures`` failed ones: ``base`` doubled per
    failure up to ``cap``, then "equal jitter" (half fixed, half ``draw`` in [0, 1)),
    so that a receiver coming back is not hit by every hook's retry at once."""
    ceiling = min(cap, base * 2 ** max(0, failures - 1))
    return ceiling / 2 + ceiling / 2 * draw


# --- where a hook may not go ---------------------------------------------------------------


def forbidden_address(address: str) -> str | None:
    """Why a hook may not reach ``address`` (an IP), or None: loopback, link-local
    (cloud metadata at 169.254.169.254 among them), private, shared (CGNAT), multicast,
    reserved and unspecified ranges are the server's own network, not the Internet."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind in ("loopback", "link_local", "private", "multicast", "reserved", "unspecified"):
        if getattr(ip, f"is_{kind}"):
            return f"{address} is a {kind.replace('_', '-')} address"
    if ip in ipaddress.ip_network("100.64.0.0/10"):
        return f"{address} is a shared (carrier-grade NAT) address"
    return None
