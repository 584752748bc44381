"""May a gang start now? Quotas and concurrency keys count it as ``size`` x its request
(pure, no I/O; docs/gangs.md).

The first of the two steps Kueue takes for a workload (admit it whole, then place its
pods): a gang is refused here when its namespace's quota could not hold all of its
members at once, or a concurrency key could not take ``size`` more, whatever the
workers have. Only then is it placed (``flux.scheduling.gangs``), and once placed each
member is counted as a single execution is (``placed``), so the ledgers read the same
afterwards as if ``size`` executions had been placed one by one.
"""

from __future__ import annotations

from flux.domain.resource_request import format_bytes
from flux.domain.resources import BYTES, Resources
from flux.scheduling.concurrency import NAME as KEY_NAME
from flux.scheduling.concurrency import PHRASE as KEY_PHRASE
from flux.scheduling.concurrency import KeyLedger
from flux.scheduling.contention import Contention
from flux.scheduling.filters.base import Reason
from flux.scheduling.gangs import GangDemand, GangPlacement
from flux.scheduling.quotas import NAME as QUOTA_NAME
from flux.scheduling.quotas import PHRASE as QUOTA_PHRASE
from flux.scheduling.quotas import QuotaLedger


def _shown(name: str, amount: float) -> str:
    return format_bytes(int(amount)) if name in BYTES else f"{amount:g}"


def gang_quantities(gd: GangDemand) -> Resources:
    """What the whole gang asks: ``size`` x each member's request (what fair share and
    quotas count)."""
    request = gd.demand.request
    if request is None:
        return Resources()
    return Resources({name: amount * gd.gang.size for name, amount in request.quantities.items()})


def quota_refusal(gd: GangDemand, quotas: QuotaLedger) -> Reason | None:
    """Why the namespace's quota cannot hold every member at once, or None."""
    namespace, size = gd.demand.namespace, gd.gang.size
    quota = quotas.quotas.get(namespace)
    if quota is None:
        return None
    count = quotas.count.get(namespace, 0)
    if quota.executions is not None and count + size > quota.executions:
        return Reason(
            QUOTA_NAME,
            QUOTA_PHRASE,
            f"held by namespace {namespace}'s quota: executions {count}/{quota.executions} hold a worker, "
            f"this gang needs {size}",
        )
    asked, held = gang_quantities(gd), quotas.held.get(namespace, {})
    over = next(
        (name for name in quota.limits if asked.get(name) and held.get(name, 0) + asked[name] > quota.limits[name]),
        None,
    )
    if over is None:
        return None
    shown = {
        what: _shown(over, amount)
        for what, amount in (("held", held.get(over, 0)), ("limit", quota.limits[over]), ("asked", asked[over]))
    }
    return Reason(
        QUOTA_NAME,
        QUOTA_PHRASE,
        f"held by namespace {namespace}'s quota: {over} {shown['held']}/{shown['limit']} in use, "
        f"this gang asks {shown['asked']} more ({size} members)",
    )


def key_refusal(gd: GangDemand, keys: KeyLedger) -> Reason | None:
    """Why a concurrency key cannot take every member at once, or None."""
    size = gd.gang.size
    for key, limit in gd.demand.keys:
        holding = keys.held[(gd.demand.namespace, key)]
        if holding + size > limit:
            never = " (more than the limit: it can never start)" if size > limit else ""
            return Reason(
                KEY_NAME,
                KEY_PHRASE,
                f"concurrency key {key!r}: {holding} of {limit} hold a worker; this gang needs {size}{never}",
            )
    return None


def refusal(gd: GangDemand, contention: Contention | None) -> Reason | None:
    """Why ``gd`` may not start now whatever the workers have, or None (admission)."""
    if contention is None:
        return None
    reason = quota_refusal(gd, contention.quotas) if contention.quotas else None
    return reason or (key_refusal(gd, contention.keys) if gd.demand.keys else None)


def placed(gd: GangDemand, placement: GangPlacement, contention: Contention | None) -> None:
    """Count each member as the placement of one execution (quotas, keys, the room it took)."""
    if contention is None:
        return
    for member in placement.members:
        contention.placed(gd.demand, member.worker, member.allotment)
