"""The fleet as this server process knows it, in memory.

A fleet's upkeep must cost the server almost nothing per idle worker, so the three
things every worker request needs are answered from memory (the shape Nomad and
Ray use: fleet state in the server, changes persisted, beats not):

- **who is calling**: session tokens, by their SHA-256, mapped to members. A miss
  reads the database once; re-registration, shutdown and eviction invalidate the
  entry here and, through ``auth:`` broadcasts, on every other replica;
- **who is alive**: the time each worker was last heard. A heartbeat updates it
  here and nowhere else; ``flux.server.liveness`` flushes it to the workers' lease
  column now and then (often with several replicas, rarely on SQLite, where there
  is one server process and a restart grants a fresh grace period anyway);
- **who may have work**: a hint set whenever ``worker:NAME`` is notified (dispatch
  assigned something, a cancel was asked, here or on another replica), so a waiting
  claim reads the database only when there is something to read, and what the
  worker was last known to hold, so a heartbeat that reports no change needs no
  query either;
- **what it has**: the last material sample and metrics heard here. Placement reads
  them from here (``flux.server.snapshot``), and ``flux.server.status`` writes the
  ones that changed to the database in one batch a second, where other replicas and
  a restarted server read them.

Everything here can be rebuilt from the database: a restarted server starts with
no members and admits each worker again at its first authenticated call.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from flux.domain.events import ExecutionState
from flux.domain.workers import Liveness, WorkerState, paced_interval
from flux.protocol.claims import ClaimedExecution, PreemptionNotice, PreemptionWithdrawal
from flux.server import topics
from flux.server.misses import RecentMisses

#: Heartbeats a worker may miss before dispatch stops choosing it.
STALE_AFTER_MISSED = 3
#: A waiting claim re-reads the database at least this often, even with no hint:
#: the safety net for a wake-up lost between replicas.
CLAIM_RECHECK = 60.0
#: How long an unknown token is remembered as unknown (spares the database a flood).
BAD_TOKEN_TTL = 5.0
BAD_TOKEN_MAX = 4096


@dataclass(frozen=True)
class Held:
    """One execution a worker holds, as far as this process last read."""

    state: str
    delivered: bool
    claimed_at: float | None
    attempt: int = 0
    #: While a preemption's grace period runs: when it ends, and for whom.
    preempt_deadline: float | None = None
    preempted_by: str | None = None


@dataclass
class Member:
    id: int
    name: str
    token_hash: str
    heartbeat_interval: float
    #: Epoch seconds the worker was last heard (here, or by the lease another replica flushed).
    last_seen: float
    draining: bool = False
    #: The worker is draining itself to stop (SIGTERM): nothing more is placed on it.
    leaving: bool = False
    #: Heard since the last lease flush.
    heard: bool = False
    #: Its last sign of life is a lease another replica flushed, not a beat heard here.
    via_lease: bool = False
    #: The resources sample and metrics last recorded, here or read from the database
    #: (materiality is judged against them; placement reads them while heard here).
    sample: dict | None = None
    metrics: dict | None = None
    #: The workers row's ``resources_version`` as the last lease sync read it (replicas).
    resources_version: int = 0
    #: Whether the database may hold GPU rows for it (unknown: True).
    gpu_rows: bool = True
    #: What it holds; None when unknown (the next heartbeat reads it).
    held: dict[str, Held] | None = None
    #: Something may be waiting for its claim.
    work_hint: bool = True
    last_claim_check: float = 0.0
    #: When a sweep first found it stale (eviction needs a second look).
    stale_since: float | None = None
    #: Preemption notices a reply already carried, by execution: the deadline told (``preempting``),
    #: or None once its withdrawal was told (``withdrawn``).
    told: dict[str, float | None] = field(default_factory=dict)
    #: What a dispatch round delivered to its waiting claim in the round's own transaction
    #: (jobs, executions to cancel): the claim answers with it, no read of its own.
    handed: tuple[list[ClaimedExecution], list[str]] | None = None
    #: Wake-ups of its claim so far (``on_notify``): did news come that a round did not read?
    notices: int = 0
    #: The heartbeat interval a reply here last told it (``FleetRegistry.pace``).
    paced: float = 0.0

    def expected_running(self) -> set[str]:
        return {eid for eid, held in (self.held or {}).items() if held.delivered}

    def foreign(self, reported: list[str]) -> list[str]:
        """What the worker reports running but no longer holds (its attempt ended, the
        execution went elsewhere): it must kill those children. Empty while unknown."""
        if self.held is None:
            return []
        return sorted(eid for eid in reported if eid not in self.held)

    def preempting(self, now: float, untold: bool = False) -> list[PreemptionNotice]:
        """The notices of what it holds that is being preempted; ``untold``: only those
        no claim reply carried yet (a claim returns early for news, not for repeats)."""
        notices = [
            PreemptionNotice(
                execution_id=eid,
                attempt=held.attempt,
                by=held.preempted_by,
                seconds=max(0.0, held.preempt_deadline - now),
            )
            for eid, held in sorted((self.held or {}).items())
            if held.preempt_deadline is not None and held.state != ExecutionState.CANCELLING.value
        ]
        deadlines = {eid: held.preempt_deadline for eid, held in (self.held or {}).items()}
        new = [n for n in notices if self.told.get(n.execution_id) != deadlines[n.execution_id]]
        for notice in new:
            self.told[notice.execution_id] = deadlines[notice.execution_id]
        return new if untold else notices

    def withdrawn(self, untold: bool = False) -> list[PreemptionWithdrawal]:
        """The preemptions a reply told of that were called off since (the attempt goes on);
        ``untold``: only those no reply carried yet (a heartbeat repeats them, a claim does not)."""
        if self.held is None:
            return []
        found = []
        for eid, deadline in list(self.told.items()):
            held = self.held.get(eid)
            if held is None:
                del self.told[eid]  # no longer held: nothing to tell
            elif held.preempt_deadline is None and (deadline is not None or not untold):
                found.append(PreemptionWithdrawal(execution_id=eid, attempt=held.attempt))
                self.told[eid] = None
        return found

    def cancelling(self) -> list[str]:
        return sorted(eid for eid, held in (self.held or {}).items() if held.state == ExecutionState.CANCELLING.value)

    def hold(self, held: dict[str, Held] | None) -> None:
        """What it holds as just read; None: unknown, its next heartbeat or claim reads it."""
        self.held = held

    def reconciled(self, held: dict[str, Held], draining: bool) -> None:
        """What the database says it holds, and whether an operator drains it."""
        self.held, self.draining = held, draining

    def record_status(self, sample: dict | None, metrics: dict | None) -> None:
        """A sample and metrics that moved materially (None: that one did not)."""
        self.sample = sample if sample is not None else self.sample
        self.metrics = dict(metrics) if metrics is not None else self.metrics

    @property
    def sampled_here(self) -> bool:
        """Its sample in memory is the newest there is: it beats here, and one was
        recorded or read since it was admitted (with replicas, a worker whose last
        sign of life is another replica's lease is read from the database)."""
        return self.sample is not None and not self.via_lease

    def hint(self, work: bool) -> None:
        """Something may (or cannot) be waiting for its claim."""
        self.work_hint = work

    def hand(self, claimed: list[ClaimedExecution], cancel: list[str], held: dict[str, Held], seen: int) -> None:
        """A round delivered ``claimed`` to it, committed: its claim answers with them. The
        round read what it holds when it had had ``seen`` wake-ups; if the only one since
        is the round's own, nothing is left for a claim to read (else the hint stays)."""
        previous = self.handed or ([], [])
        self.handed = (previous[0] + claimed, sorted(set(previous[1]) | set(cancel)))
        self.held = held
        if self.notices == seen + 1:
            self.work_hint = False

    def take_handed(self) -> tuple[list[ClaimedExecution], list[str]] | None:
        handed, self.handed = self.handed, None
        return handed

    def claim_checked(self, now: float) -> None:
        """Its claim read the database now: no hint is left."""
        self.work_hint, self.last_claim_check = False, now


@dataclass
class FleetRegistry:
    #: Other server processes share the database (PostgreSQL): leases flush often.
    shared: bool = False
    members: dict[str, Member] = field(default_factory=dict)
    _by_token: dict[str, str] = field(default_factory=dict)
    _bad_tokens: RecentMisses = field(default_factory=lambda: RecentMisses(BAD_TOKEN_TTL, BAD_TOKEN_MAX))
    #: Silence is counted from no earlier than this: the server's start, or the end
    #: of a stretch when the server itself was too busy to hear anyone.
    grace_from: float = field(default_factory=time.time)
    #: Seconds between lease flushes, which bounds how old another replica's view is.
    lease_interval: float = 10.0
    #: The fleet's heartbeats a second at most (``flux.domain.workers.paced_interval``).
    max_heartbeats_per_second: float = 0.0
    #: Bumped whenever what dispatch must know of the fleet changed: a member admitted
    #: or forgotten, a drain, a worker gone stale or back, a sample another replica stored.
    fleet_version: int = 0
    #: Members whose sample or metrics changed: not yet seen by placement, not yet written.
    _resampled: set[str] = field(default_factory=set)
    _unwritten: dict[str, Member] = field(default_factory=dict)

    def fleet_changed(self) -> None:
        self.fleet_version += 1

    # --- membership ------------------------------------------------------------------

    def admit(self, member: Member) -> Member:
        old = self.members.get(member.name)
        if old is not None:
            self._by_token.pop(old.token_hash, None)
            member.last_seen = max(member.last_seen, old.last_seen)
        self.members[member.name] = member
        self._by_token[member.token_hash] = member.name
        self._bad_tokens.forget(member.token_hash)
        self.fleet_changed()
        return member

    def is_current(self, member: Member) -> bool:
        """Still the member of its name (not re-registered, evicted or gone meanwhile)."""
        return self.members.get(member.name) is member

    def leave(self, member: Member) -> None:
        """It drains itself to stop: dispatch places nothing more on it."""
        member.leaving = True
        self.fleet_changed()

    def set_draining(self, name: str, draining: bool) -> None:
        member = self.members.get(name)
        if member is not None:
            member.draining = draining

    def forget(self, name: str) -> None:
        member = self.members.pop(name, None)
        if member is not None:
            self._by_token.pop(member.token_hash, None)
            self.fleet_changed()

    def by_token(self, token_hash: str) -> Member | None:
        name = self._by_token.get(token_hash)
        return self.members.get(name) if name is not None else None

    def known_bad(self, token_hash: str, now: float) -> bool:
        return self._bad_tokens.known(token_hash, now)

    def remember_bad(self, token_hash: str, now: float) -> None:
        self._bad_tokens.remember(token_hash, now)

    # --- liveness --------------------------------------------------------------------

    def beat(self, member: Member, now: float) -> None:
        member.last_seen = max(member.last_seen, now)
        member.heard = True
        member.via_lease = False
        if member.stale_since is not None:
            member.stale_since = None
            self.fleet_changed()  # back: dispatch may use it again

    def _pace_now(self, member: Member) -> float:
        return paced_interval(member.heartbeat_interval, len(self.members), self.max_heartbeats_per_second)

    def pace(self, member: Member) -> float:
        """The interval a reply tells it to beat at now, remembered as told."""
        member.paced = self._pace_now(member)
        return member.paced

    def interval(self, member: Member) -> float:
        """The interval its silence is counted in: the pace now, or the one it was last
        told if longer (a fleet that shrank must not find it stale before its next beat)."""
        return max(self._pace_now(member), member.paced)

    def silence(self, member: Member, now: float) -> float:
        return now - max(member.last_seen, self.grace_from)

    def stale_after(self, member: Member) -> float:
        """Silence after which dispatch skips a worker: three missed beats when its
        last sign of life was a beat heard here. When it was a lease another replica
        flushed, never less than what that view of a healthy worker can lag: the other
        replica flushes every ``lease_interval``, this one reads every
        ``lease_interval`` on its own phase (each on a fixed rate, late only by its
        own database work), and the beat itself comes every interval: two periods
        and a beat, plus a period and a beat of slack."""
        beat = self.interval(member)
        own = STALE_AFTER_MISSED * beat
        if self.shared and member.via_lease:
            return max(own, 3 * self.lease_interval + 2 * beat)
        return own

    def liveness(self, member: Member | None, now: float) -> WorkerState:
        if member is None:
            return WorkerState.ONLINE
        return WorkerState.STALE if self.silence(member, now) > self.stale_after(member) else WorkerState.ONLINE

    def liveness_of(self, name: str, now: float) -> Liveness | None:
        """What this process knows of a worker's liveness; None when it knows nothing."""
        member = self.members.get(name)
        if member is None:
            return None
        return Liveness(self.liveness(member, now), member.last_seen, member.leaving)

    def mark_stale(self, member: Member, now: float) -> None:
        """A sweep found it silent: dispatch stops counting on it."""
        member.stale_since = now
        self.fleet_changed()

    def unmark_stale(self, member: Member) -> None:
        """Not evicted after all (gone already, or heard by another replica)."""
        member.stale_since = None

    def forgive(self, now: float) -> None:
        """The server was too busy to hear anyone: nobody's silence counts until now."""
        self.grace_from = max(self.grace_from, now)

    def take_heard(self) -> list[tuple[int, float]]:
        """(worker id, last seen) of everyone heard since the last call."""
        heard = []
        for member in self.members.values():
            if member.heard:
                member.heard = False
                heard.append((member.id, member.last_seen))
        return heard

    def sync(self, rows: list) -> None:
        """Adopt the database's view (``fleet.leases`` rows): workers registered or
        released by another replica, the leases other replicas flushed, and the samples
        they stored for workers this replica does not hear (placement re-reads those)."""
        stored_elsewhere = False
        for row in rows:
            member = self.members.get(row.name)
            if row.state == WorkerState.OFFLINE:
                if member is not None:
                    self.forget(row.name)
            elif member is None or member.token_hash != row.session_token_hash:
                self.admit(
                    Member(
                        id=row.id,
                        name=row.name,
                        token_hash=row.session_token_hash,
                        heartbeat_interval=row.heartbeat_interval,
                        last_seen=row.last_heartbeat_at,
                        draining=row.draining,
                        via_lease=True,
                        resources_version=row.resources_version,
                    )
                )
            elif row.last_heartbeat_at > member.last_seen:
                member.last_seen = row.last_heartbeat_at
                member.via_lease = True
            member = self.members.get(row.name)
            if member is not None and member.resources_version != row.resources_version:
                member.resources_version = row.resources_version
                if member.via_lease:  # another replica hears it and stored a sample: ours is older
                    member.sample = member.metrics = None
                    stored_elsewhere = True
        if stored_elsewhere:
            self.fleet_changed()

    # --- status ----------------------------------------------------------------------

    def record_status(self, member: Member, sample: dict | None, metrics: dict | None) -> None:
        """A sample or metrics that moved materially: placement sees it at its next
        round (``take_resampled``), the database at the next batch (``take_unwritten``)."""
        member.record_status(sample, metrics)
        self._resampled.add(member.name)
        self._unwritten[member.name] = member

    def take_resampled(self) -> set[str]:
        """Names whose sample or metrics changed since the last call. Placement takes
        them in a database thread while heartbeats add more: one ``pop`` at a time
        (atomic under the GIL), never the set swapped under a concurrent ``add``."""
        names = set()
        with contextlib.suppress(KeyError):
            while True:
                names.add(self._resampled.pop())
        return names

    def take_unwritten(self) -> list[Member]:
        """Members whose status changed since the last call and that are still current
        (a re-registration stored its own sample; a worker gone needs none)."""
        members, self._unwritten = self._unwritten, {}
        return [m for m in members.values() if self.is_current(m)]

    def unwritten_again(self, members: list[Member]) -> None:
        """A batch that failed: written with the next one (unless newer news replaced it)."""
        for member in members:
            self._unwritten.setdefault(member.name, member)

    # --- hints -----------------------------------------------------------------------

    def on_notify(self, key: str) -> None:
        """A hook for ``Notifier``: learn from every wake-up, local or remote."""
        topic = topics.parse(key)
        if topic is None:
            return
        if topic.kind == topics.Kind.WORKER:
            member = self.members.get(topic.subject)
            if member is not None:
                member.notices += 1
                member.hint(True)
                member.hold(None)
        elif topic.kind == topics.Kind.AUTH:
            member = self.members.get(topic.subject)
            if member is not None and not member.token_hash.startswith(topic.token_prefix):
                self.forget(topic.subject)  # another replica re-registered or released it
            self.fleet_changed()
        elif topic.kind == topics.Kind.STATUS:  # a sample stored or a drain, here or on another replica
            self.fleet_changed()

    def claim_should_check(self, member: Member, now: float) -> bool:
        return member.work_hint or now - member.last_claim_check >= CLAIM_RECHECK

    def needs_reconcile(self, member: Member, reported: set[str], now: float, settle: float) -> bool:
        """Does a heartbeat reporting ``reported`` need the database?

        Only when what the worker holds is unknown here, or something delivered to it
        long enough ago is missing from what it reports (a claim response lost).
        """
        if member.held is None:
            return True
        for execution_id in member.expected_running() - reported:
            claimed_at = member.held[execution_id].claimed_at
            if claimed_at is None or claimed_at < now - settle:
                return True
        return False
