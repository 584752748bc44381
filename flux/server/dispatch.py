"""The dispatcher: one background loop per server that places queued executions.

It runs a placement round whenever something changes (a submission, a slot freed,
a registration, a sample that moved, a worker gone stale). While executions wait
unplaced it also runs once a second (pending timeouts, and changes it was not told
about); with an empty queue it only runs a safety round every ``IDLE_ROUND``
seconds, so an idle fleet costs it nothing. Assignment is a conditional update of
the execution row (optimistic concurrency), so replicas sharing one database never
double-assign. Worker liveness comes from the fleet registry, not the database;
the views it places on come from ``flux.server.snapshot``, and the notes on what
still waits from ``flux.server.explain``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Iterable, Iterator, NamedTuple

from sqlalchemy import text
from sqlalchemy.orm import Session

from flux.domain.gang import Gang
from flux.domain.policy import ExecutionPolicy
from flux.domain.priority import Preemption as ClassPolicy
from flux.domain.workflow_options import gang_from_json
from flux.scheduling import rounds
from flux.scheduling.contention import Contention
from flux.scheduling.demand import Demand, demand_from_row
from flux.scheduling.fairshare import FairShare
from flux.scheduling.filters.base import Reason
from flux.scheduling.holders import Holder
from flux.scheduling.preemption import Costs
from flux.scheduling.quotas import QuotaLedger
from flux.server import executions, fleet, queue, topics, usage
from flux.server.contention import PREEMPTION_SLACK, expire_preemptions, preempt, victims, withdraw
from flux.server.database import Database
from flux.server.executions.gangs import claim as gangs_claim
from flux.server.explain import record_waiting
from flux.server.gang_watch import GangWatch
from flux.server.locks import AdvisoryLock
from flux.server.metrics import Claimed, ServerMetrics
from flux.server.namespaces import RulesCache
from flux.server.notify import Notifier
from flux.server.registry import FleetRegistry, Held, Member
from flux.server.schemas import ClaimedExecution
from flux.server.snapshot import FleetSnapshot

log = logging.getLogger("flux.server.dispatch")

#: Seconds between rounds while executions wait, and with an empty queue.
BACKLOG_ROUND, IDLE_ROUND = 1.0, 60.0
#: A round slower than this is logged: placement is meant to take milliseconds.
SLOW_ROUND = 1.0
#: With an empty queue, the fleet's changes are read at most this often (``_keep_warm``).
WARM_SCAN = 1.0
#: Another replica holds the placement lock: try again this soon (its rounds take milliseconds).
LOCK_RETRY = 0.05


class Handed(NamedTuple):
    """What a round delivered to a worker whose claim waits on this replica."""

    member: Member
    #: Its claim's wake-ups when the round read what it holds (``Member.hand``).
    seen: int
    claimed: list[ClaimedExecution]
    cancel: list[str]
    held: dict[str, Held]


class Round(NamedTuple):
    #: Each placement: its worker, namespace, workflow and how long it waited.
    assigned: list[Claimed]
    #: Whether any execution was left waiting.
    backlog: bool
    #: Workers told to preempt something (their long polls are woken).
    preempting: frozenset[str] = frozenset()
    #: Deliveries made in the round's transaction, for claims waiting here.
    handed: tuple[Handed, ...] = ()
    #: The round spent its budget (``flux.scheduling.rounds``): the next one starts at once.
    again: bool = False


class Dispatcher:
    def __init__(
        self,
        db: Database,
        notifier: Notifier,
        registry: FleetRegistry,
        metrics: ServerMetrics,
        policy: ExecutionPolicy | None = None,
    ):
        self.db = db
        self.policy = policy or ExecutionPolicy()
        self.metrics = metrics
        self.notifier = notifier
        self.registry = registry
        self._wake = asyncio.Event()
        self._wake.set()  # the first round runs at once: whatever waited while the server was down
        #: Executions were left waiting by the last round (or it failed): keep looking.
        self._backlog = True
        #: A round is under way (from its wake-up to its end): a change now may come too late for it.
        self._placing = False
        #: The fleet as placement sees it (``flux.server.snapshot``).
        self.snapshot = FleetSnapshot(registry)
        #: Rounds that placed something or looked for room (``Contention.offset``).
        self._rounds = 0
        #: When the earliest execution backing off after a crash may be placed.
        self._next_ready = math.inf
        #: The namespaces' quotas and weights, read again when one changes.
        self.rules = RulesCache()
        #: Each namespace's decayed dominant usage and when it was so (``usage.accrue``), and
        #: when it is next accrued (at once: a restarted server reads what the table says).
        self._usage: dict[str, tuple[float, float]] = {}
        self._usage_due = 0.0
        #: A round placed something since usage was last accrued (the snapshot has not read it yet).
        self._placed_since_accrual = False
        #: Preemptions may be in progress (an empty queue's round looks for ones to withdraw).
        self._preempting = False
        #: Placed gangs' start deadlines, and the wake-ups their ends owe (``flux.server.gang_watch``).
        self.gangs = GangWatch(db, notifier, self.policy, self.kick)
        notifier.hooks.append(self.rules.on_notify)

    def kick(self) -> None:
        self._wake.set()

    def kick_if_waiting(self) -> None:
        """A round only if the last one left work waiting: more room (a worker's sample
        moved) places nothing from an empty queue, and a busy fleet's samples would
        otherwise run rounds back to back."""
        if self._backlog:
            self.kick()

    def freed(self) -> None:
        """A slot was freed and nothing queued (an execution finished): on one server, a
        round only if work may wait: the last round left some, or one is under way (it
        may have read the fleet before the slot was freed, and what it leaves waiting
        would otherwise wait for the backlog tick). The round after every completion
        placed nothing from an empty queue (docs/latency.md). Replicas share the queue:
        what another's round left waiting may fit now, so they look."""
        if self._backlog or self._placing or self.registry.shared:
            self.kick()

    async def run(self) -> None:
        self.gangs.started()
        while True:
            await self.gangs.expire()
            timeout = min(BACKLOG_ROUND if self._backlog else IDLE_ROUND, max(0.0, self._next_ready - time.time()))
            timeout = min(timeout, max(0.0, self.gangs.due - time.time()))
            if self._accruing():
                timeout = min(timeout, max(0.0, self._usage_due - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            if self._accruing() and time.monotonic() >= self._usage_due:
                await self._accrue()
                if not self._wake.is_set() and not self._backlog and time.time() < self._next_ready:
                    continue  # only the usage was due
            self._wake.clear()
            self._next_ready = math.inf
            self._placing = True
            try:
                started = time.monotonic()
                if self._backlog:
                    for execution_id in await self.db.run(lambda s: executions.expire_pending(s, time.time())):
                        self.notifier.notify(topics.execution(execution_id))
                    for worker_name in await self.db.run(lambda s: expire_preemptions(s, time.time(), self.policy)):
                        self.notifier.notify(topics.worker(worker_name))
                round_started = time.monotonic()
                done = await self.db.run(self._round)
                assigned, self._backlog = done.assigned, done.backlog
                self.metrics.rounds.labels(part="total").observe(time.monotonic() - round_started)
                if time.monotonic() - started > SLOW_ROUND:
                    log.warning(
                        "dispatch round took %.2fs (database queue: %d waiting)",
                        time.monotonic() - started,
                        self.db.backlog()[0],
                    )
            except Exception:  # noqa: BLE001 - a failed round (e.g. a replica race) is retried next time
                log.exception("dispatch round failed; retrying")
                self._backlog = True
                self.snapshot.invalidate()
                await asyncio.sleep(0.1)
                continue
            finally:
                self._placing = False
            if done.again:
                self._wake.set()
            self._placed_since_accrual |= bool(assigned)
            for claimed in assigned:
                self.metrics.observe_dispatch(claimed)
            for worker_name in {claimed.worker for claimed in assigned} | done.preempting:
                self.notifier.notify(topics.worker(worker_name))
            for handed in done.handed:  # after the wake-ups: what they would read, they have
                handed.member.hand(handed.claimed, handed.cancel, handed.held, handed.seen)

    def _accruing(self) -> bool:
        """Usage is accrued at start (a restarted server reads what the table says) and then
        while anything holds a worker: an idle server runs no statement for it (a namespace
        that holds nothing decays when read)."""
        if self.policy.fair_share_half_life <= 0:
            return False
        return self._usage_due == 0.0 or self._placed_since_accrual or bool(self.snapshot.held.quantities)

    async def _accrue(self) -> None:
        """Add what each namespace holds to its decayed usage (``flux.server.usage``)."""
        self._usage_due = time.monotonic() + usage.USAGE_PERIOD
        self._placed_since_accrual = False

        def accrue(session: Session) -> dict[str, tuple[float, float]]:
            with self.snapshot.lock:
                self.snapshot.views(session)  # who holds what now, also when no round read it
                held = {name: dict(sums) for name, sums in self.snapshot.held.quantities.items()}
                capacity = self.snapshot.pool.capacity()
            return usage.accrue(session, held, capacity, time.time(), self.policy.fair_share_half_life)

        try:
            self._usage = await self.db.run(accrue)
        except Exception:  # noqa: BLE001 - fair share goes on with what it had; the next period tries again
            log.exception("accruing namespace usage failed; retrying")

    def _demand(self, row) -> Demand:  # noqa: ANN001 - a row of queue.page
        named = self.policy.priorities.by_name.get(row.priority_class) if row.priority_class else None
        return demand_from_row(
            execution_id=row.id,
            requests=row.requests,
            affinity=row.affinity,
            routing=row.routing,
            namespace=row.namespace,
            priority=row.priority,
            may_preempt=named is None or named.preemption is not ClassPolicy.NEVER,
            keys=tuple((k["key"], k["limit"]) for k in row.concurrency or ()),
            scheduled_at=row.scheduled_at,
        )

    def _round(self, session: Session) -> Round:
        started, cpu = time.perf_counter(), time.thread_time()
        with self.snapshot.lock:  # the round changes the views it places on in place
            placed = self._place(session)
        self.metrics.rounds.labels(part="work").observe(time.perf_counter() - started)
        self.metrics.rounds.labels(part="cpu").observe(time.thread_time() - cpu)
        return placed

    def _place(self, session: Session) -> Round:
        """One placement round over the queue in its order (priority, fair share, then
        oldest first), page by page while slots remain, ``rounds.BUDGET`` placements at
        most (``flux.scheduling.rounds``).

        Paging means executions that fit nowhere cannot block newer ones behind them
        (no head-of-line blocking), however many of them there are, except the room a
        higher priority holds (``flux.scheduling.contention``).
        """
        seen: set[str] = set()
        first = queue.page(session, 0, seen)
        if not first.rows:
            self._keep_warm(session)
            woken = self._withdraw(session, victims(session), set(), set(), set()) if self._preempting else ()
            return Round([], False, frozenset(woken))
        if session.bind.dialect.name == "postgresql" and not session.scalar(
            text(f"SELECT pg_try_advisory_xact_lock({AdvisoryLock.PLACEMENT.value})")
        ):
            # Another replica is placing right now. Placement needs a consistent view of
            # every worker's free slots and reservations, so one replica places at a time;
            # this one tries again as soon as that round is likely over. (Waiting for the
            # next backlog tick, a second away, was the tail of submit->claimed with two
            # replicas: a submission that met the other's round waited ~1 s.)
            self._next_ready = min(self._next_ready, time.time() + LOCK_RETRY)
            return Round([], True)
        workers = self.snapshot.views(session)
        now = time.time()
        contention, fair = self._ledgers(session, first)
        gangs: dict[str, Gang] = {}
        pages = self._pages(session, first, seen, now, gangs)
        outcome = rounds.run(pages, self.snapshot.pool, contention, fair, gangs=gangs)
        placements = outcome.placements
        members = [m for g in outcome.gangs for m in g.members]
        self.snapshot.placed_on({p.worker_name for p in placements} | {m.worker for m in members} | contention.touched)
        placed = {p.execution_id for p in placements} | {g.execution_id for g in outcome.gangs}
        if outcome.gang_round is not None:  # why each gang waits, as explain says it
            for gang_id, why in outcome.gang_round.waiting.items():
                contention.waiting[gang_id] = why if isinstance(why, Reason) else why.reason
        noticed = preempt(session, contention.preemptions, self.policy.preemption_grace, now)
        needed = contention.needed | {v for p in contention.preemptions for v in p.victims}
        withdrawn = self._withdraw(session, self.snapshot.holders, needed, contention.sought, placed)
        woken = frozenset(v.worker_name for v in noticed) | frozenset(withdrawn)
        for victim in noticed:
            self.metrics.preemptions.labels(namespace=victim.namespace).inc()
        if noticed:  # the backstop: come back once the grace period (and its slack) is over
            self._next_ready = min(self._next_ready, now + self.policy.preemption_grace + PREEMPTION_SLACK + 0.1)
        record_waiting(
            session, [row for row in first.rows if row.id in outcome.examined], placed, workers, contention.waiting
        )
        backlog = first.more or any(row.id not in placed for row in first.rows)
        if not placements and not members:
            return Round([], backlog, woken)
        waiting = self._claims_waiting({p.worker_name for p in placements} | {m.worker for m in members})
        now = time.time()
        claims = [
            executions.Claim(p.execution_id, p.worker_name, p.allotment, p.reason, p.worker_name in waiting)
            for p in placements
        ]
        rows = executions.claim_all(session, claims, now)  # one UPDATE and one INSERT for the round
        claimed = [
            Claimed(p.worker_name, row.namespace, row.workflow_name, now - row.pending_since)
            for p, row in zip(placements, rows)
        ]
        fresh = {p.execution_id for p in placements}
        for gang in outcome.gangs:  # each gang's members in this transaction: never a part of one
            for member, row in zip(gang.members, gangs_claim(session, gang, set(waiting), now)):
                claimed.append(Claimed(member.worker, row.namespace, row.workflow_name, now - row.pending_since))
                fresh.add(row.id)
            self.gangs.placed(now + gangs[gang.execution_id].start_timeout)
        fresh = frozenset(fresh)
        return Round(
            claimed,
            backlog,
            woken,
            tuple(self._hand_over(session, member, fresh) for member in waiting.values()),
            outcome.spent,
        )

    def _withdraw(
        self, session: Session, holders: Iterable[Holder], needed: set[str], sought: set[str], placed: set[str]
    ) -> list[str]:
        """Call off the preemptions no room needs any more (``flux.server.contention.withdraw``);
        returns the victims' workers. Remembers whether any may still be in progress."""
        preempting = [h for h in holders if h.preempted_by is not None]
        self._preempting = bool(preempting) or bool(needed)
        if not preempting:
            return []
        workers = withdraw(session, preempting, needed, sought, placed, time.time())
        if workers:
            self.metrics.withdrawals.inc(len(workers))
        return workers

    def _claims_waiting(self, workers: set[str]) -> dict[str, Member]:
        """The workers, of those a round placed on, whose claim waits on this replica: the
        round delivers to them in its own transaction and the claim answers once it
        commits, without a transaction of its own (docs/latency.md). Other claims read
        the database as before."""
        members = {name: self.registry.members.get(name) for name in sorted(workers)}
        return {n: m for n, m in members.items() if m is not None and self.notifier.listened(topics.worker(n))}

    def _hand_over(self, session: Session, member: Member, fresh: frozenset[str]) -> Handed:
        """What the round delivers to ``member`` (``fresh``: what it claimed as delivered)."""
        seen = member.notices
        jobs, cancel, held = executions.deliver(session, member.name, fresh)
        return Handed(member, seen, jobs, cancel, fleet.held_map(held))

    def _pages(
        self, session: Session, first: queue.Page, seen: set[str], now: float, gangs: dict[str, Gang]
    ) -> Iterator[list[Demand]]:
        """The queue's pages as demands, each read only when the round goes on to it;
        ``gangs`` gains the shape of each gang they hold."""
        page, number = first, 0
        while page.rows:  # the first page always: what fits nowhere may still be given room
            ready = [row for row in page.rows if self._ready(row, now)]
            gangs.update((row.id, gang_from_json(row.gang)) for row in ready if row.gang)
            yield [self._demand(row) for row in ready]
            if not page.more:
                return
            number += 1
            page = queue.page(session, number, seen)

    def _ledgers(self, session: Session, first: queue.Page) -> tuple[Contention, FairShare | None]:
        """The round's ledgers: who holds what (the snapshot read it), quotas and weights,
        the lowest priority that holds or waits, and fair share when the first page holds
        several namespaces (one namespace's queue is FIFO). What each namespace holds the
        snapshot keeps up to date (``Holdings``); the rest is built only when asked."""
        quotas, weights = self.rules.get(session)
        holders, held = self.snapshot.holders, self.snapshot.held
        lowest = queue.lowest_waiting(session) if first.more else None
        lowest = first.rows[-1].priority if lowest is None else lowest
        floor = min(lowest, held.lowest if held.lowest is not None else lowest)
        self._rounds += 1  # where searches for room start in a large fleet moves each round
        now = time.time()
        contention = Contention(
            holders,
            QuotaLedger(quotas, held) if quotas else None,
            floor,
            offset=self._rounds,
            grouped=self.snapshot.holders_by_worker,
            costs=Costs(now, self.policy.preemption_cooldown),
        )
        several = len({row.namespace for row in first.rows}) > 1
        if not several:
            return contention, None
        # shares of the fleet's ONLINE capacity (the pool keeps its sum), from what each namespace
        # holds and what it held in the recent past (its decayed usage)
        past = usage.past_shares(self._usage, now, self.policy.fair_share_half_life)
        return contention, FairShare(self.snapshot.pool.capacity(), weights, held, past)

    def _keep_warm(self, session: Session) -> None:
        """With nothing to place, read what changed in the fleet so that the next
        submission does not pay for a registration storm, but at most once every
        ``WARM_SCAN`` seconds: a scan reads every worker's row, and a storm of a
        thousand registrations kicked a round, and so a scan, for each."""
        if not self.snapshot.changed_since_scan():
            return
        if self.snapshot.seconds_since_scan() >= WARM_SCAN:
            self.snapshot.views(session)
        else:  # come back for it once the period is over
            self._next_ready = min(self._next_ready, time.time() + WARM_SCAN - self.snapshot.seconds_since_scan())

    def _ready(self, row, now: float) -> bool:  # noqa: ANN001 - a row of queue.page
        """False while the execution backs off after a crashed attempt; the loop then
        wakes when the earliest backoff ends."""
        if row.ready_at is None or row.ready_at <= now:
            return True
        self._next_ready = min(self._next_ready, row.ready_at)
        return False
