"""The delivery loop: what is due in the outbox, POSTed, at least once, in order.

A pass claims due deliveries in one short transaction (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, so replicas share the outbox and never send a row twice at once; SQLite
has one writer): each claimed row is leased (its next attempt moved past the POST's
timeout), so a crash mid-POST only delays it, and it is sent again under the same id.
Only the oldest pending delivery of a hook and subject (an execution, a worker, a
schedule) is ever due: a later event waits until the earlier one was delivered or
died. Each outcome is recorded in a transaction of its own: delivered, retried after
an exponential backoff with jitter, or dead once ``--hooks-max-age`` has passed.

The POSTs run on the event loop (httpx, async), never on a database thread, at most
``PER_HOOK`` at a time per hook: a receiver that hangs holds its own hook's slots
until the timeout and nothing else, not dispatch nor the other hooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass

import httpx
from cryptography.fernet import InvalidToken, MultiFernet
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, aliased

from flux.domain.hooks import retry_delay
from flux.server import outbox
from flux.server.database import Database
from flux.server.hook_models import HookAttemptModel, HookDeliveryModel, HookModel
from flux.server.hooks import sending
from flux.server.metrics import ServerMetrics
from flux.server.outbox import DEAD, DELIVERED, PENDING, Subscriptions
from flux.server.settings import ServerSettings

log = logging.getLogger("flux.server.hooks")

#: POSTs in flight at once per hook.
PER_HOOK = 4
#: Deliveries claimed per pass.
BATCH = 100
#: The longest wait between retries, however many failures.
MAX_BACKOFF = 3600.0
#: Seconds before another look at what is due but was blocked.
POLL = 1.0
#: Finished deliveries (delivered, dead) are kept this long for ``flux hook show``,
#: then deleted with their attempts, ``PRUNED`` at a time, every ``PRUNE_EVERY`` seconds.
KEEP = 7 * 24 * 3600.0
PRUNED, PRUNE_EVERY = 1000, 3600.0
#: Where replicas share the database: how often the copy of the subscriptions is read
#: again, besides when a hook change is announced.
REFRESH = 5.0


def lease_for(timeout: float) -> float:
    """How long a claimed delivery is left to its POST: past its timeout, with room to
    record the outcome; then (its server died) another pass sends it again."""
    return 1.5 * timeout + 5.0


@dataclass(frozen=True)
class DueDelivery:
    """A delivery this replica claimed: the POST it owes, and its attempt's number."""

    seq: int
    hook_id: int
    number: int
    url: str
    secret_encrypted: str
    body: dict


def claim(session: Session, now: float, full: set[int], free: dict[int, int], lease: float) -> list[DueDelivery]:
    """Lease the due deliveries that come first for their hook and subject."""
    d, earlier = HookDeliveryModel, aliased(HookDeliveryModel)
    blocked = (
        select(earlier.seq)
        .where(
            earlier.hook_id == d.hook_id, earlier.subject == d.subject, earlier.state == PENDING, earlier.seq < d.seq
        )
        .exists()
    )
    query = select(d).where(d.state == PENDING, d.next_attempt_at <= now, ~blocked)
    if full:
        query = query.where(d.hook_id.not_in(full))
    rows = list(session.scalars(query.order_by(d.seq).limit(BATCH).with_for_update(skip_locked=True, of=d)))
    hooks = {h.id: h for h in session.scalars(select(HookModel).where(HookModel.id.in_({r.hook_id for r in rows})))}
    due = []
    for row in rows:
        hook = hooks.get(row.hook_id)
        if hook is None:  # deleted since: its deliveries go
            session.delete(row)
        elif row.expires_at <= now:  # past its age while no server ran
            row.state, row.finished_at = DEAD, now
        elif free.get(row.hook_id, PER_HOOK) > 0:
            free[row.hook_id] = free.get(row.hook_id, PER_HOOK) - 1
            row.attempts += 1
            row.next_attempt_at = now + lease
            due.append(DueDelivery(row.seq, row.hook_id, row.attempts, hook.url, hook.secret_encrypted, row.body))
    return due


def record(session: Session, delivery: DueDelivery, outcome: sending.Outcome, base: float) -> str | None:
    """The attempt and what follows it: delivered, a retry, or dead. None: the delivery is gone."""
    row = session.get(HookDeliveryModel, delivery.seq)
    if row is None:
        return None
    now = time.time()
    session.add(
        HookAttemptModel(
            delivery_seq=delivery.seq,
            number=delivery.number,
            at=now - outcome.latency,
            status_code=outcome.status_code,
            latency=outcome.latency,
            error=outcome.error,
        )
    )
    if outcome.ok:
        row.state, row.finished_at = DELIVERED, now
    else:
        retry_at = now + retry_delay(delivery.number, base, MAX_BACKOFF, random.random())
        if retry_at > row.expires_at:
            row.state, row.finished_at = DEAD, now
        else:
            row.next_attempt_at = retry_at
    return row.state


def prune(session: Session, before: float) -> int:
    """Delete up to ``PRUNED`` deliveries finished before ``before``; how many."""
    d = HookDeliveryModel
    seqs = list(session.scalars(select(d.seq).where(d.state != PENDING, d.finished_at < before).limit(PRUNED)))
    if seqs:
        session.execute(delete(HookAttemptModel).where(HookAttemptModel.delivery_seq.in_(seqs)))
        session.execute(delete(d).where(d.seq.in_(seqs)))
    return len(seqs)


def next_due(session: Session) -> float | None:
    return session.scalar(select(func.min(HookDeliveryModel.next_attempt_at)).where(HookDeliveryModel.state == PENDING))


class Deliveries:
    """The loop of one server process."""

    def __init__(
        self,
        db: Database,
        copy: Subscriptions,
        keys: MultiFernet | None,
        settings: ServerSettings,
        metrics: ServerMetrics,
        shared: bool,
    ):
        self.db, self.copy, self.keys, self.settings, self.metrics, self.shared = (
            db,
            copy,
            keys,
            settings,
            metrics,
            shared,
        )
        self.in_flight: Counter[int] = Counter()
        self._woken = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._prune_at = time.monotonic() + PRUNE_EVERY
        self._refreshed_at = float("-inf")

    def wake(self) -> None:
        """Thread-safe: rows were enqueued and committed."""
        with contextlib.suppress(RuntimeError):  # the loop closed (the server stopping): it finds them at start
            self._loop.call_soon_threadsafe(self._woken.set)

    async def refresh(self) -> None:
        self._refreshed_at = time.monotonic()
        self.copy.hooks = await self.db.read(outbox.subscriptions, counted=False)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.copy.wake = self.wake
        self.copy.attach(self.refresh)
        await self.refresh()
        timeout = httpx.Timeout(self.settings.hooks_timeout)
        async with httpx.AsyncClient(
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
        ) as client:
            self._client = client
            try:
                claimed = 0
                while True:
                    try:
                        await self._wait(claimed)
                        claimed = await self._pass()
                    except Exception:  # noqa: BLE001 - the database away: the next pass tries again
                        log.exception("hook delivery pass failed; retrying")
                        claimed = 0
                        await asyncio.sleep(POLL)
            finally:
                for task in self._tasks:
                    task.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _wait(self, claimed: int) -> None:
        """Until woken (a commit enqueued, a send ended), or the next delivery is due.
        After a pass that claimed nothing, what is due is blocked (its hook's slots are
        full, an earlier delivery of its subject is in flight): a send's end wakes it,
        or ``POLL``. Where replicas share the database, at least every ``REFRESH``: the
        subscriptions are read again, and what another replica enqueued is looked at."""
        due = await self.db.read(next_due, counted=False) if self.copy.hooks else None
        delay = None if due is None else max(0.0, due - time.time())
        if delay == 0.0 and not claimed:
            delay = POLL
        if self.shared:
            delay = REFRESH if delay is None else min(delay, REFRESH)
        if delay != 0.0:
            try:
                await asyncio.wait_for(self._woken.wait(), delay)
            except TimeoutError:
                if self.shared and time.monotonic() - self._refreshed_at >= REFRESH:
                    await self.refresh()
        self._woken.clear()

    async def _pass(self) -> int:
        """Claim what is due and start sending it; how many."""
        if not self.copy.hooks:
            return 0
        if time.monotonic() > self._prune_at:
            self._prune_at = time.monotonic() + PRUNE_EVERY
            await self.db.run(lambda s: prune(s, time.time() - KEEP))
        full = {hook for hook, count in self.in_flight.items() if count >= PER_HOOK}
        free = {hook: PER_HOOK - count for hook, count in self.in_flight.items()}
        lease = lease_for(self.settings.hooks_timeout)
        due = await self.db.run(lambda s: claim(s, time.time(), full, free, lease))
        for delivery in due:
            self.in_flight[delivery.hook_id] += 1
            task = asyncio.create_task(self._send(delivery))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(due)

    async def _send(self, delivery: DueDelivery) -> None:
        try:
            outcome = await self._post(delivery)
            state = await self.db.run(lambda s: record(s, delivery, outcome, self.settings.hooks_backoff))
            self.metrics.hook_deliveries.labels(outcome="delivered" if outcome.ok else "failed").inc()
            if state == DEAD:
                self.metrics.hook_deliveries.labels(outcome="dead").inc()
                log.warning(
                    "hook delivery %s is dead after %d attempt(s): %s",
                    delivery.body["id"],
                    delivery.number,
                    outcome.error,
                )
        except Exception:  # noqa: BLE001 - the lease runs out and it is sent again
            log.exception("hook delivery %s failed to record", delivery.body["id"])
        finally:
            self.in_flight[delivery.hook_id] -= 1
            self._woken.set()  # the next of its subject may go now

    async def _post(self, delivery: DueDelivery) -> sending.Outcome:
        try:
            secret = self.keys.decrypt(delivery.secret_encrypted.encode()).decode() if self.keys is not None else None
        except InvalidToken:
            secret = None
        if secret is None:
            return sending.Outcome(None, 0.0, "the server's secrets key cannot decrypt this hook's secret")
        return await sending.post(
            self._client,
            delivery.url,
            secret,
            delivery.body,
            self.settings.hooks_allow_private,
            self.settings.hooks_timeout,
        )
