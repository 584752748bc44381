"""The scaling loop: every ``PASS_INTERVAL`` seconds, and soon after an execution
changes (a submission: the first worker of an empty pool should not wait out the
interval), one replica decides, for every pool, what to start and what to stop, and
then asks the providers.

A pass is one transaction under a PostgreSQL advisory lock (``AdvisoryLock.AUTOSCALE``; a
replica that does not get it skips the pass), so two replicas never both count a
pool short: the workers one pass asks for are rows (``pool_workers``, STARTING)
before any provider is called, and the next pass, on any replica, counts them.
Providers are called after the transaction, each pool on its own: a failure is
recorded in the pool's state with a backoff and never stops the loop or another pool.

Scale-down reuses the operator's drain: an idle worker chosen by the planner is
marked draining (STOPPING); a later pass stops it only if it still holds nothing,
and undrains it if work reached it in between.

A waiting gang is asked of the pools whole, beside the single executions
(``flux.server.autoscale.gangs``): all its workers at once from one pool, in one
topology domain, and the idle workers it counts on are not drained meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass, field

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from flux.domain.events import HOLDING_STATES, ExecutionState
from flux.domain.workers import WorkerState
from flux.scheduling import autoscale
from flux.scheduling.autoscale import POOL_LABEL, Member, MemberState
from flux.scheduling.demand import Demand, demand_from_row
from flux.scheduling.snapshot import WorkerView
from flux.server import topics
from flux.server.autoscale import gangs, store
from flux.server.autoscale.providers import provider
from flux.server.autoscale.providers.base import Change, Context, Provider, Stop
from flux.server.locks import AdvisoryLock
from flux.server.models import ExecutionModel, WorkerModel
from flux.server.pool_models import PoolModel, PoolWorkerModel
from flux.server.services import Services

log = logging.getLogger("flux.server.autoscale")

#: Seconds between passes with nothing said; and the least between two passes (0.1 s
#: was measured: on SQLite each pass holds the writer submissions wait for, and B18's
#: 60 submissions took twice as long under load, for no earlier first start).
PASS_INTERVAL, MIN_GAP = 2.0, 0.5
#: A worker asked for and not registered after this long is given up (and stopped).
START_TIMEOUT = 300.0
#: A failing provider is called again after 2, 4, 8 ... seconds, at most this.
MAX_BACKOFF = 60.0
#: A drained worker is stopped no sooner than this after its drain, so that dispatch on
#: every replica has heard of the drain before the last check that it holds nothing.
DRAIN_GRACE = 5.0
#: A provider call that takes longer is a failure: the loop waits for it no longer.
PROVIDER_TIMEOUT = 120.0
#: Without a pool, whether one exists is read again this often (a pool made on another
#: replica is also announced at once, through the notifier).
POOLS_RECHECK = 60.0
#: Waiting executions one pass reads at most (oldest first).
WAITING_LIMIT = 5000


@dataclass
class Outcome:
    """What a pass's transaction decided, for the providers and the fleet in memory."""

    changes: list[Change] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    undrained: list[str] = field(default_factory=list)
    #: The providers the pools use, readied before any worker is asked of them.
    kinds: set[str] = field(default_factory=set)


def backoff(failures: int) -> float:
    return min(MAX_BACKOFF, 2.0 ** max(failures, 1))


class Autoscaler:
    def __init__(self, svc: Services, interval: float = PASS_INTERVAL):
        self.svc = svc
        self.interval = interval
        settings = svc.settings
        host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
        self.context = Context(f"http://{host}:{settings.port}", str(settings.home), svc.bootstrap_token.decode())
        self.providers: dict[str, Provider] = {}
        self._wake = asyncio.Event()
        #: Whether any pool exists, as last read; None: read it again (a pool changed).
        #: A server without pools reads nothing, however often executions change.
        self._pools: bool | None = None
        self._pools_read = 0.0

    def on_notify(self, key: str) -> None:
        """A ``Notifier`` hook: an execution or a pool changed, here or on another replica."""
        topic = topics.parse(key)
        if key == topics.POOLS:
            self._pools = None
        if key == topics.POOLS or (topic is not None and topic.kind == topics.Kind.EXECUTION):
            self._wake.set()

    async def run(self) -> None:
        self._wake.set()  # the first pass at once: whether pools exist is read while the server starts
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            try:
                await self.pass_once()
            except Exception:  # noqa: BLE001 - a failed pass is tried again next time
                log.exception("scaling pass failed; retrying")
            await asyncio.sleep(MIN_GAP)

    async def close(self) -> None:
        for each in self.providers.values():
            await each.close()

    async def pass_once(self) -> None:
        if self._pools is None or time.monotonic() - self._pools_read > POOLS_RECHECK:
            self._pools, self._pools_read = bool(await self.svc.db.read(store.any_pool)), time.monotonic()
        if not self._pools:  # the common case: no pool, nothing read, no write transaction
            return
        now = time.time()
        outcome = await self.svc.db.run(lambda s: self.decide(s, now))
        if outcome is None:
            return
        for kind in outcome.kinds:
            self._provider(kind)
        for names, draining in ((outcome.drained, True), (outcome.undrained, False)):
            for name in names:
                self.svc.registry.set_draining(name, draining)
                self.svc.wake_worker(name)
                self.svc.notifier.notify(topics.status(name))
        if outcome.drained or outcome.undrained:
            self.svc.dispatcher.kick()
        await asyncio.gather(*(self.apply(change) for change in outcome.changes))  # one slow pool holds up no other

    def _provider(self, kind: str) -> Provider:
        """This replica's provider of ``kind``, made (and readied) when a pool first uses it."""
        each = self.providers.get(kind)
        if each is None:
            each = self.providers[kind] = provider(kind, self.context)
            each.prepare()
        return each

    async def apply(self, change: Change) -> None:
        kind = change.provider
        each = self._provider(kind)
        try:
            handles = await asyncio.wait_for(each.apply(change), PROVIDER_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - any provider failure is reported and retried
            message = (
                f"no answer within {PROVIDER_TIMEOUT:g}s"
                if isinstance(exc, TimeoutError)
                else str(exc) or type(exc).__name__
            )
            log.warning("pool %s: provider %s failed: %s", change.pool, kind, message)
            await self.svc.db.run(lambda s: _failed(s, change, message, time.time()))
            return
        await self.svc.db.run(lambda s: _succeeded(s, change, handles))

    def decide(self, session: Session, now: float) -> Outcome | None:
        if session.bind.dialect.name == "postgresql" and not session.scalar(
            text(f"SELECT pg_try_advisory_xact_lock({AdvisoryLock.AUTOSCALE.value})")
        ):
            return None  # another replica is deciding
        pools = list(session.scalars(select(PoolModel).order_by(PoolModel.created_at, PoolModel.name)))
        if not pools:
            return Outcome()
        views = self.svc.dispatcher.snapshot.views(session)
        live = {v.name: v for v in views}
        held = dict(
            session.execute(
                select(ExecutionModel.worker_name, func.count())
                .where(ExecutionModel.state.in_(HOLDING_STATES))
                .group_by(ExecutionModel.worker_name)
            ).all()
        )
        outcome = Outcome(kinds={p.provider for p in pools})
        rows = _reconcile(session, {p.name: p for p in pools}, live, held, now, outcome)
        members = [_member(row, held, now) for row in rows]
        templates = [store.template(p) for p in pools]
        plan = autoscale.plan(templates, _waiting(session), views, members)
        plan = gangs.with_gangs(plan, templates, gangs.waiting(session), views, members)
        for pool in pools:
            _act(
                session,
                pool,
                plan.decisions[pool.name],
                [r for r in rows if r.pool == pool.name],
                held,
                now,
                outcome,
                plan.unfit,
            )
        return outcome


def _waiting(session: Session) -> list[Demand]:
    """The single executions that wait; a gang waits as one (``gangs.waiting``), its
    members never alone."""
    rows = session.execute(
        select(ExecutionModel.id, ExecutionModel.requests, ExecutionModel.affinity, ExecutionModel.namespace)
        .where(
            ExecutionModel.state == ExecutionState.SCHEDULED.value,
            ExecutionModel.gang.is_(None),
            ExecutionModel.gang_id.is_(None),
        )
        .order_by(ExecutionModel.scheduled_at)
        .limit(WAITING_LIMIT)
    )
    return [
        demand_from_row(execution_id=r.id, requests=r.requests, affinity=r.affinity, namespace=r.namespace)
        for r in rows
    ]


def _reconcile(
    session: Session, pools: dict[str, PoolModel], live: dict[str, WorkerView], held: dict, now: float, outcome: Outcome
) -> list[PoolWorkerModel]:
    """Rows brought up to date with the fleet: a registered STARTING one is RUNNING; a
    pool worker nobody asked for (a Deployment's Pod, a restart) is adopted, taking the
    place of the oldest starting row; a gone one is forgotten; idle times are kept."""
    rows = store.members(session)
    known = {row.name for row in rows}
    for view in live.values():
        pool = view.labels.get(POOL_LABEL)
        if pool in pools and view.name not in known and view.state == WorkerState.ONLINE:  # not one being stopped
            waiting = next(
                (r for r in rows if r.pool == pool and r.state == MemberState.STARTING and r.name not in live), None
            )
            requested = waiting.requested_at if waiting else now
            if waiting is not None:
                rows.remove(waiting)
                session.delete(waiting)
            row = PoolWorkerModel(name=view.name, pool=pool, state=MemberState.RUNNING, requested_at=requested)
            session.add(row)
            rows.append(row)
    kept = []
    for row in rows:
        registered = row.name in live
        if row.state == MemberState.STARTING and registered:
            row.state = MemberState.RUNNING
        if (row.state != MemberState.STARTING and not registered) or row.pool not in pools:
            session.delete(row)  # exited, evicted, or its pool is gone
            continue
        if row.state == MemberState.STARTING and now - row.requested_at > START_TIMEOUT:
            pools[row.pool].decision = f"worker {row.name} did not register within {START_TIMEOUT:g}s: given up"
            row.state = MemberState.STOPPING  # stopped (whatever the provider started) by this pass
        if row.state == MemberState.RUNNING:
            row.idle_since = None if held.get(row.name) else (row.idle_since or now)
        kept.append(row)
    session.flush()
    return kept


def _member(row: PoolWorkerModel, held: dict, now: float) -> Member:
    return Member(
        row.name,
        row.pool,
        MemberState(row.state),
        held.get(row.name, 0),
        now - row.idle_since if row.idle_since is not None else 0.0,
    )


def _act(
    session: Session,
    pool: PoolModel,
    decision: autoscale.Decision,
    rows: list[PoolWorkerModel],
    held: dict,
    now: float,
    outcome: Outcome,
    unfit: int,
) -> None:
    """Record the decision; drain what it stops, stop what was drained and holds nothing,
    undrain what got work meanwhile, and name the workers to start."""
    pool.desired, pool.decided_at = decision.desired, now
    pool.decision = decision.reason + (f"; {unfit} waiting executions fit no pool" if unfit else "")
    if pool.retry_at is not None and pool.retry_at > now:
        pool.decision += f"; provider backing off after {pool.failures} failures"
        return
    stops = []
    for row in rows:
        if row.state != MemberState.STOPPING:
            continue
        if held.get(row.name):  # work reached it before its drain did: keep it
            row.state, row.idle_since, row.stopping_since = MemberState.RUNNING, None, None
            _set_draining(session, row.name, False)
            outcome.undrained.append(row.name)
        elif row.stopping_since is None or now - row.stopping_since >= DRAIN_GRACE:
            stops.append(Stop(row.name, row.handle))
    for name in decision.stop:
        row = next(r for r in rows if r.name == name)
        row.state, row.stopping_since = MemberState.STOPPING, now
        _set_draining(session, name, True)
        outcome.drained.append(name)
    start = tuple(f"{pool.name}-{secrets.token_hex(4)}" for _ in range(decision.start))
    for name in start:
        session.add(PoolWorkerModel(name=name, pool=pool.name, state=MemberState.STARTING, requested_at=now))
    if pool.deleting and not rows and not start:
        session.delete(pool)
        return
    if start or stops:
        size = len(rows) + len(start) - len(stops)
        outcome.changes.append(
            Change(
                pool.name,
                pool.provider,
                dict(pool.labels),
                dict(pool.resources),
                pool.gpus,
                pool.slots,
                dict(pool.options),
                start,
                tuple(stops),
                size,
            )
        )


def _set_draining(session: Session, name: str, draining: bool) -> None:
    session.execute(update(WorkerModel).where(WorkerModel.name == name).values(draining=draining))


def _failed(session: Session, change: Change, message: str, now: float) -> None:
    """Reported in the pool's state and retried after a backoff; what it was to start is forgotten."""
    pool = session.get(PoolModel, change.pool)
    if pool is not None:
        pool.failures += 1
        pool.provider_error = message
        pool.retry_at = now + backoff(pool.failures)
    for name in change.start:
        row = session.get(PoolWorkerModel, name)
        if row is not None and row.state == MemberState.STARTING:
            session.delete(row)


def _succeeded(session: Session, change: Change, handles: dict[str, str]) -> None:
    pool = session.get(PoolModel, change.pool)
    if pool is not None:
        pool.failures, pool.provider_error, pool.retry_at = 0, None, None
    for name, handle in handles.items():
        row = session.get(PoolWorkerModel, name)
        if row is not None:
            row.handle = handle
    for stop in change.stop:
        row = session.get(PoolWorkerModel, stop.name)
        if row is not None and row.state == MemberState.STOPPING:
            session.delete(row)
