"""Why a gang waits: per topology domain, what its workers hold of the gang and what
they lack (pure, no I/O; docs/gangs.md).

``needs 4 workers with gpu=8 in one rack: rack r1 has 3 that fit, r2 has 2; 1 more must
free up in r1``. The line is rendered from typed values that carry their numbers
(``DomainRoom``, ``GangShortfall``), as a single execution's summary is from its
``Reason`` s, so the CLI, the console and the API show one truth. Which domain it must
free up in is the one closest to holding the gang among those that could hold it were
their workers idle (``explain.capacity_view``): "wait" is told apart from "never here".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from flux.domain.gang import Gang
from flux.domain.resource_request import ResourceRequest
from flux.scheduling.binding import GANG, Blocker
from flux.scheduling.explain import capacity_view
from flux.scheduling.filters import Reason
from flux.scheduling.gangs import Board, Fit, GangDemand
from flux.scheduling.snapshot import WorkerView

#: Domains a message names at most (the closest first); every one is in ``domains``.
SHOWN = 5


@dataclass(frozen=True)
class DomainRoom:
    """One topology domain as a waiting gang sees it."""

    domain: str
    #: Members its workers hold now.
    fit: int
    #: Its workers (those that hold members and those that do not).
    workers: int
    #: Members its workers would hold were they idle; None: not asked.
    could: int | None = None
    #: Why its workers hold no (more) members: (phrase, how many workers), most common first.
    reasons: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class GangShortfall:
    """Why a gang fits nowhere now, domain by domain (closest first)."""

    gang: Gang
    request: ResourceRequest | None
    domains: tuple[DomainRoom, ...]
    #: Workers without the topology label (in no domain).
    unlabelled: int = 0

    @property
    def target(self) -> DomainRoom | None:
        """Where it waits for room: the closest domain that could ever hold it (when that
        was asked; else the closest), or None when none could."""
        for room in self.domains:
            if room.could is None or room.could >= self.gang.size:
                return room
        return None

    @property
    def lacking(self) -> int:
        """Members that must free up in ``target`` (0 when there is none)."""
        target = self.target
        return 0 if target is None else self.gang.size - target.fit

    @property
    def message(self) -> str:
        return f"{self._needs()}: {self._rooms()}{self._verdict()}"

    @property
    def reason(self) -> Reason:
        """The line as the ``Reason`` an explanation leads with (``binding.GANG``: a gang
        whose members cannot be laid out together)."""
        return Reason(GANG, str(Blocker.GANG_TOPOLOGY), self.message)

    def _needs(self) -> str:
        gang = self.gang
        asked = f" with {self.request.describe()}" if self.request is not None else ""
        if gang.per_worker == 1:
            return f"needs {gang.size} workers{asked} in one {gang.topology}"
        return f"needs {gang.size} members{asked}, up to {gang.per_worker} a worker, in one {gang.topology}"

    def _rooms(self) -> str:
        if not self.domains:
            return f"no worker has the label {self.gang.topology}"
        if self.gang.per_worker == 1:
            said = [
                f"{room.domain} has {room.fit or 'none'}" + (" that fit" if i == 0 and room.fit else "")
                for i, room in enumerate(self.domains[:SHOWN])
            ]
        else:
            said = [f"{room.domain} has room for {room.fit}" for room in self.domains[:SHOWN]]
        said[0] = f"{self.gang.topology} {said[0]}"
        text = ", ".join(said)
        if len(self.domains) > SHOWN:
            text += f", {len(self.domains) - SHOWN} more hold less"
        return text

    def _verdict(self) -> str:
        target = self.target
        if target is not None:
            return f"; {self.lacking} more must free up in {target.domain}"
        most = max(room.could or 0 for room in self.domains) if self.domains else 0
        return f"; no {self.gang.topology} could ever hold it, even idle (the most one holds is {most})"

    def lines(self) -> list[str]:
        """One line per domain, with why its other workers hold nothing (for ``explain``)."""
        out = []
        for room in self.domains:
            line = f"{self.gang.topology} {room.domain}: {room.workers} workers hold {room.fit}"
            if room.could is not None:
                line += f" now, {room.could} idle"
            if room.reasons:
                line += "; " + ", ".join(f"{count} {phrase}" for phrase, count in room.reasons)
            out.append(line)
        if self.unlabelled:
            have = "worker has" if self.unlabelled == 1 else "workers have"
            out.append(f"{self.unlabelled} {have} no label {self.gang.topology}")
        return out


def _reasons(board: Board, domain: str) -> tuple[tuple[str, int], ...]:
    counted = Counter(reason.phrase for reason in board.why.get(domain, {}).values())
    return tuple(sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])))


def shortfall(gang: Gang, request: ResourceRequest | None, board: Board, idle: Board | None = None) -> GangShortfall:
    """The board's domains as a ``GangShortfall``; ``idle``: the same kind's board of the
    fleet as if idle (what each domain could ever hold)."""
    board.count_all()
    if idle is not None:
        idle.count_all()
    domains = board.views.keys()
    rooms = [
        DomainRoom(
            domain,
            board.totals.get(domain, 0),
            board.workers_in(domain),
            None if idle is None else idle.totals.get(domain, 0),
            _reasons(board, domain),
        )
        for domain in domains
    ]
    rooms.sort(key=lambda room: (-room.fit, -(room.could or 0), room.domain))
    return GangShortfall(gang, request, tuple(rooms), len(board.unlabelled))


def explain_gang(gd: GangDemand, workers: Iterable[WorkerView], namespace: str | None = None) -> GangShortfall | None:
    """Why ``gd`` fits nowhere now, or None when it fits (``flux execution explain``)."""
    workers = list(workers)
    fit = Fit(gd.demand, gd.gang, namespace)
    board = Board(fit, gd.gang, workers)
    if board.best(gd.gang.size) is not None:
        return None
    idle = Board(fit, gd.gang, (capacity_view(w) for w in workers))
    return shortfall(gd.gang, gd.demand.request, board, idle)


def never_fits(gd: GangDemand, workers: Iterable[WorkerView]) -> str | None:
    """Why no domain of the registered fleet could ever hold ``gd``, even idle, or None:
    the warning registration gives a gang that may not be preempted (it would wait for a
    fleet that does not exist, holding room as it waits)."""
    idle = [capacity_view(w) for w in workers]
    short = explain_gang(gd, idle)
    return None if short is None or short.target is not None else short.message
