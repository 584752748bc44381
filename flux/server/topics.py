"""Notifier keys: what one side notifies and another waits on (``flux.server.notify``).

Every key is built and parsed here, so the notifying side and the waiting side, and
other replicas (keys cross them through ``flux.server.broadcast``), spell it alike:

- ``worker:NAME``: new work or a cancel for a worker (its claim and the registry's hint);
- ``execution:ID``: an execution changed state; ``events:ID``: a checkpoint; ``logs:ID``: new lines;
- ``status:NAME``: a worker's stored sample or drain changed (dispatch re-reads it);
- ``auth:NAME:PREFIX``: a worker's session token changed (``-``: revoked);
- ``executions`` (``watch``), ``fleet`` (``GET /fleet``'s stream), ``schedules`` (the firing
  loop), ``namespaces`` (quotas, weights) and ``tokens`` (a client token was revoked: every
  replica reads the tokens again) carry no subject.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    WORKER = "worker"
    EXECUTION = "execution"
    EVENTS = "events"
    LOGS = "logs"
    STATUS = "status"
    AUTH = "auth"


#: Raised for every change that may show in the executions list (``flux.server.watch``).
EXECUTIONS = "executions"
#: Raised for every change that may show in the fleet's summary (``flux.server.workers.summary``).
FLEET = "fleet"
#: Wakes the schedules' firing loop.
SCHEDULES = "schedules"
#: A hook was created or deleted (``flux.server.outbox.Subscriptions``).
HOOKS = "hooks"

#: A pool was created, changed or deleted: wakes the scaling loop (docs/autoscaling.md).
POOLS = "pools"
#: A namespace's quota or weight changed: placement reads them again (``flux.server.namespaces.RulesCache``).
NAMESPACES = "namespaces"
#: A client token was revoked (``flux.server.tokens.TokenCache``).
TOKENS = "tokens"
#: How much of a token's hash an ``auth`` key carries; ``REVOKED`` stands for none.
TOKEN_PREFIX, REVOKED = 16, "-"
#: The kinds whose keys mean an execution may have changed (its state, events, or new claims).
ABOUT_EXECUTIONS = frozenset({Kind.EXECUTION, Kind.EVENTS, Kind.WORKER})
#: The kinds whose keys mean the fleet's summary may have changed (a worker's sample or drain too).
ABOUT_FLEET = frozenset({Kind.EXECUTION, Kind.WORKER, Kind.STATUS})


@dataclass(frozen=True)
class Topic:
    """A parsed key: its kind, and the worker's name or the execution's id."""

    kind: Kind
    subject: str
    #: ``auth`` only: the new token hash's prefix, or ``REVOKED``.
    token_prefix: str = ""


def _key(kind: Kind, subject: str) -> str:
    return f"{kind}:{subject}"


def worker(name: str) -> str:
    return _key(Kind.WORKER, name)


def execution(execution_id: str) -> str:
    return _key(Kind.EXECUTION, execution_id)


def events(execution_id: str) -> str:
    return _key(Kind.EVENTS, execution_id)


def logs(execution_id: str) -> str:
    return _key(Kind.LOGS, execution_id)


def status(name: str) -> str:
    return _key(Kind.STATUS, name)


def auth(name: str, token_hash: str | None) -> str:
    """``token_hash`` None: the worker's session was revoked."""
    return _key(Kind.AUTH, f"{name}:{token_hash[:TOKEN_PREFIX] if token_hash else REVOKED}")


def of(kind: Kind, subject: str) -> str:
    """The key of ``kind`` about ``subject`` (a follower that waits on several kinds)."""
    return _key(kind, subject)


def parse(key: str) -> Topic | None:
    """The topic of a key; None for a key without a subject or of an unknown kind."""
    kind, colon, rest = key.partition(":")
    if not colon or kind not in Kind.__members__.values():
        return None
    if kind == Kind.AUTH:
        name, _, prefix = rest.rpartition(":")
        return Topic(Kind.AUTH, name, prefix or REVOKED)
    return Topic(Kind(kind), rest)
