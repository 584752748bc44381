"""The server's snapshot of its fleet: worker rows turned into placement views, by name.

A round must cost about the same with a thousand idle workers as with ten, so
nothing here is redone per worker unless that worker changed: the workers table is
scanned only when the registry says the fleet changed (a registration, a drain, a
worker gone stale or back, a sample another replica stored) or every
``FLEET_RESCAN`` seconds as a safety net; a worker's view is rebuilt only when its
sample or registration changed, and its round view (what it holds applied) only when
what it holds changed or the last round placed work on it. Each view that is new is
handed to the ``FreePool`` (``flux.scheduling.pool``) that rounds place from, so a
round never walks the fleet to find a free worker.

A worker that beats here has its sample read from memory (``Member.sampled_here``):
the registry names the ones that moved since the last round, and only those views are
redone, with no database read. The database's copy is written in batches
(``flux.server.status``) and read only for workers this replica does not hear.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import Row, select
from sqlalchemy.orm import Session, selectinload

from flux.domain.allotment import Allotment
from flux.domain.events import HOLDING_STATES, ExecutionState
from flux.domain.workers import WorkerState
from flux.scheduling.allocation import with_allotments
from flux.scheduling.holders import Holder, Holdings
from flux.scheduling.pool import FreePool
from flux.scheduling.snapshot import WorkerView, resampled, worker_view
from flux.server.models import ExecutionModel, PackageModel, WorkerModel
from flux.server.registry import FleetRegistry, Member
from flux.server.resources import gpus, quantities, view_sample

#: The workers table is re-read at least this often even if nothing said it changed.
FLEET_RESCAN = 10.0
#: Package sets kept in memory at most (each distinct set of a fleet, ~120 rows).
MAX_PACKAGE_SETS = 1024


#: What a round reads of each execution that holds a worker: its allotment for the
#: worker's view, the rest for quotas, concurrency limits, fair share and preemption.
_HOLDING = select(
    ExecutionModel.id,
    ExecutionModel.worker_name,
    ExecutionModel.allotment,
    ExecutionModel.namespace,
    ExecutionModel.priority,
    ExecutionModel.preemptible,
    ExecutionModel.claimed_at,
    ExecutionModel.concurrency,
    ExecutionModel.preempt_deadline,
    ExecutionModel.state,
    ExecutionModel.preempted_by,
    ExecutionModel.progress_at,
    ExecutionModel.min_runtime,
    ExecutionModel.preempted_at,
    ExecutionModel.gang_id,
    # a gang's own row holds no worker: its members do (docs/gangs.md)
).where(ExecutionModel.state.in_(HOLDING_STATES), ExecutionModel.worker_name.is_not(None))


def _holder(row) -> Holder:  # noqa: ANN001 - a row of _HOLDING
    return Holder(
        row.id,
        row.worker_name,
        row.namespace,
        row.priority or 0,
        row.preemptible is not False,
        Allotment.from_json(row.allotment),
        row.claimed_at or 0.0,
        tuple(k["key"] for k in row.concurrency or ()),
        row.preempt_deadline is not None or row.state == ExecutionState.CANCELLING.value,
        # a cancelled victim leaves whatever its preemption becomes: only a victim may be kept;
        # so does a gang member whose gang's attempt ended (never withdrawn: docs/gangs.md)
        row.preempted_by if row.state != ExecutionState.CANCELLING.value and row.preempted_by != row.gang_id else None,
        row.progress_at or 0.0,
        row.min_runtime or 0.0,
        row.preempted_at,
        row.gang_id,
    )


def _signature(allotments: list[dict] | tuple) -> tuple:
    return tuple(sorted(json.dumps(a, sort_keys=True) for a in allotments)) if allotments else ()


def _sample(worker: WorkerModel) -> dict:
    """The worker's last sample as plain data, by field name (what a view takes of it):
    its custom resources in the same namespace as the probed quantities."""
    total, available = quantities(worker)
    return dict(total=total, available=available, gpus=gpus(worker), metrics=worker.resources.metrics)


def _view(worker: WorkerModel, packages: dict[str, str]) -> WorkerView:
    return worker_view(
        name=worker.name,
        labels=worker.labels,
        packages=packages,
        max_concurrent_executions=worker.max_concurrent_executions,
        allocation=worker.allocation,
        registered_seq=worker.id,
        namespaces=worker.namespaces,
        **_sample(worker),
    )


def _with_resources(view: WorkerView, worker: WorkerModel) -> WorkerView:
    return resampled(view, **_sample(worker))


class _Claim(NamedTuple):
    """A holder, with what it was built from (its claim: kept while that lasts)."""

    key: tuple
    holder: Holder


class _RoundView(NamedTuple):
    """A worker's round view (what it holds applied), with what it was built from."""

    key: tuple
    view: WorkerView
    #: The view it was built on: kept alive with it, so the ``id`` in ``key`` stays unique.
    base: WorkerView


@dataclass
class _Built:
    """A worker's view, the row (``resources_version``, ``registered_at``) it was last
    read from, and its custom resources (a sample from memory joins them)."""

    version: int
    registered_at: float
    view: WorkerView
    custom: dict

    def from_memory(self, member: Member) -> None:
        """Its sample (or, not knowing one, its metrics) as the registry holds it."""
        if member.sample is not None:
            self.view = resampled(self.view, **view_sample(member.sample, member.metrics, self.custom))
        elif member.metrics is not None:
            self.view = resampled(self.view, metrics=member.metrics)


class FleetSnapshot:
    def __init__(self, registry: FleetRegistry):
        self.registry = registry
        #: Worker views by name, with what they were built from.
        self._views: dict[str, _Built] = {}
        #: Package sets by digest, as {name: version} (``_load_package_sets``).
        self._package_sets: dict[str, dict[str, str]] = {}
        #: The rows of the last scan, and the registry's fleet version it saw.
        self._rows: list = []
        self._fleet_version = -1
        self._scanned_at = 0.0
        #: Each worker's view as the last round used it, keyed by what it was built from.
        self._round_views: dict[str, _RoundView] = {}
        #: Workers the last round placed work on: their round views were changed in place.
        self._touched: set[str] = set()
        #: The current round views in scan order, each worker's index, who held work last time.
        self._views_now: list = []
        self._position: dict[str, int] = {}
        self._holding: set[str] = set()
        #: The current round views again, by name, with the ONLINE ones that have a free
        #: slot least loaded first: what rounds place from.
        self.pool = FreePool()
        #: The executions holding a worker at the last read (``flux.scheduling.holders``),
        #: and the same by worker (what a search for room examines).
        self.holders: list[Holder] = []
        self.holders_by_worker: dict[str, list[Holder]] = {}
        #: Each holder by id, with what it was built from: kept while its claim lasts, so a
        #: round parses only new claims' allotments (and their quantities stay summed).
        self._holder_of: dict[str, _Claim] = {}
        #: What each namespace's holders hold, kept up to date with what came and went.
        self.held = Holdings()
        #: The caches above are shared by rounds (which change views in place) and readers.
        self.lock = threading.RLock()

    def changed_since_scan(self) -> bool:
        return self._fleet_version != self.registry.fleet_version

    def seconds_since_scan(self) -> float:
        return time.monotonic() - self._scanned_at

    def views(self, session: Session) -> list[WorkerView]:
        """``_views_of`` under the snapshot's lock: on PostgreSQL database work runs on
        several threads, and explanations and registrations read the fleet beside rounds."""
        with self.lock:
            return self._views_of(session)

    def placed_on(self, worker_names: set[str]) -> None:
        """A round placed work on these workers: their round views were changed in place."""
        self._touched = worker_names

    def invalidate(self) -> None:
        """A failed round may have changed some views in place: rebuild them all."""
        self._round_views.clear()
        self._fleet_version = -1
        self._holder_of, self.held = {}, Holdings()

    def _views_of(self, session: Session) -> list[WorkerView]:
        """Views of every worker that is not OFFLINE, reloading only what changed.

        STALE and DRAINING workers are included (with no free slots) so that
        explanations and feasibility can name them. A round must cost about the same
        with a thousand idle workers as with ten, so nothing here is redone per worker
        unless that worker changed: the workers table is scanned only when the
        registry says the fleet changed (a registration, a sample that moved, a drain,
        a worker gone stale or back, here or on another replica) or every
        ``FLEET_RESCAN`` seconds as a safety net; a worker's round view is rebuilt
        only when what it holds changed or the last round placed work on it.
        """
        held = self._read_holders(session)
        resampled_here = self._resample_heard_here()
        for row in self._rows_to_view(session, held, resampled_here):
            view = self._round_view(row, held.get(row.name, ()))
            self._views_now[self._position[row.name]] = view
            if self.pool.views.get(row.name) is not view:
                self.pool.put(view)
        self._holding = set(held)
        self._touched = set()
        return self._views_now

    def _read_holders(self, session: Session) -> dict[str, list[dict]]:
        """The allotments held on each worker, as stored; ``holders`` and ``held`` brought
        up to date on the way (a holder rebuilt only when its claim changed)."""
        held: dict[str, list[dict]] = {}
        self.holders, self.holders_by_worker = [], {}
        known, self._holder_of = self._holder_of, {}
        came: list[Holder] = []
        went: list[Holder] = []
        for row in session.execute(_HOLDING):
            held.setdefault(row.worker_name, []).append(row.allotment or {})
            key = (row.worker_name, row.claimed_at, row.priority, row.preempt_deadline, row.state, row.progress_at)
            cached = known.pop(row.id, None)
            if cached is None or cached.key != key:
                went += [cached.holder] if cached is not None else []
                cached = _Claim(key, _holder(row))
                came.append(cached.holder)
            self._holder_of[row.id] = cached
            self.holders.append(cached.holder)
            self.holders_by_worker.setdefault(row.worker_name, []).append(cached.holder)
        self.held.update(came, went + [claim.holder for claim in known.values()])
        return held

    def _resample_heard_here(self) -> set[str]:
        """Samples heard here that moved, applied from memory (no read); their names."""
        registry = self.registry
        resampled_here = registry.take_resampled()
        for name in resampled_here:
            built, member = self._views.get(name), registry.members.get(name)
            if built is not None and member is not None and not member.via_lease:
                built.from_memory(member)
        return resampled_here

    def _rows_to_view(self, session: Session, held: dict[str, list[dict]], resampled_here: set[str]) -> list:
        """Every worker's row after a scan (when the fleet changed, or ``FLEET_RESCAN``
        passed); else only those of workers whose round view can differ."""
        if self._fleet_version != self.registry.fleet_version or time.monotonic() - self._scanned_at > FLEET_RESCAN:
            self._fleet_version = self.registry.fleet_version
            self._scanned_at = time.monotonic()
            self._rows = rows = self._scan(session)
            self._position = {row.name: i for i, row in enumerate(rows)}
            self._views_now = [None] * len(rows)
            for gone in self.pool.views.keys() - self._position.keys():
                self.pool.drop(gone)
            return rows
        # only workers that hold, held, were just given something, or were resampled can differ
        names = {*held, *self._holding, *self._touched, *resampled_here}
        return [self._rows[self._position[n]] for n in names if n in self._position]

    def _round_view(self, row: Row, allotments: list[dict] | tuple) -> WorkerView:
        """The worker's view with what it holds applied, rebuilt only when that, its view
        or its state changed, or the last round placed work on it."""
        base = self._views[row.name].view
        member = self.registry.members.get(row.name)
        if row.draining or (member is not None and member.leaving):
            state = WorkerState.DRAINING
        else:
            state = WorkerState.STALE if member is not None and member.stale_since else WorkerState.ONLINE
        key = (id(base), state, _signature(allotments))
        cached = self._round_views.get(row.name)
        if cached is None or cached.key != key or row.name in self._touched:
            view = with_allotments(
                base.evolve(running=len(allotments), state=state), map(Allotment.from_json, allotments)
            )
            cached = self._round_views[row.name] = _RoundView(key, view, base)
        return cached.view

    def _scan(self, session: Session) -> list:
        rows = session.execute(
            select(
                WorkerModel.id,
                WorkerModel.name,
                WorkerModel.resources_version,
                WorkerModel.registered_at,
                WorkerModel.draining,
            ).where(WorkerModel.state != WorkerState.OFFLINE)
        ).all()
        changed = []
        for row in rows:
            built, member = self._views.get(row.name), self.registry.members.get(row.name)
            if built is None or built.registered_at != row.registered_at:
                changed.append(row.id)  # new, or registered again
            elif built.version != row.resources_version:
                if member is not None and member.sampled_here:
                    built.version = row.resources_version  # our own batch wrote what memory holds
                else:
                    changed.append(row.id)  # another replica stored a sample
        if changed:
            self._load(session, changed)
        live = {row.name for row in rows}
        for gone in set(self._views) - live:  # evicted or renamed: drop their cached views
            del self._views[gone]
            self._round_views.pop(gone, None)
        return rows

    def _load(self, session: Session, ids: list[int]) -> None:
        """(Re)build the views of these workers from their rows; a worker sampled here
        then takes its sample from memory (newer than any batch written)."""
        loaded = list(
            session.scalars(
                select(WorkerModel)
                .where(WorkerModel.id.in_(ids))
                .options(selectinload(WorkerModel.resources), selectinload(WorkerModel.gpus))
            )
        )
        new = {
            w.id for w in loaded if not (w.name in self._views and self._views[w.name].registered_at == w.registered_at)
        }
        self._load_package_sets(session, {w.packages_digest for w in loaded if w.id in new})
        for worker in loaded:
            if worker.id in new:
                view = _view(worker, self._package_sets[worker.packages_digest])
            else:
                view = _with_resources(self._views[worker.name].view, worker)  # a sample moved; nothing else did
            built = self._views[worker.name] = _Built(
                worker.resources_version, worker.registered_at, view, dict(worker.custom_resources or {})
            )
            member = self.registry.members.get(worker.name)
            if member is not None and member.sampled_here:
                built.from_memory(member)

    def _load_package_sets(self, session: Session, digests: set[str]) -> None:
        """Package sets by digest, each read once (sets never change): a fleet from one
        image costs one set's rows, not ~120 per worker."""
        if len(self._package_sets) > MAX_PACKAGE_SETS:  # upgrades leave old sets behind: start afresh
            self._package_sets.clear()
        missing = digests - self._package_sets.keys()
        for digest in missing:
            self._package_sets[digest] = {}
        if missing:
            for digest, name, version in session.execute(
                select(PackageModel.digest, PackageModel.name, PackageModel.version).where(
                    PackageModel.digest.in_(missing)
                )
            ):
                self._package_sets[digest][name] = version
