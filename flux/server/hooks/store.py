"""Hooks in the database: create, list, show, delete; their deliveries, a redelivery,
and a test delivery (functions of a Session, run by ``Database.run``).

The signing secret is stored encrypted with the secrets key (Fernet, as secrets are:
``flux.server.secrets``); without a key a hook is refused (409), as a secret is, since
a secret kept in the clear would be the one exception to "secrets at rest are
encrypted". It leaves the server once: in the answer to a creation that did not give one.
"""

from __future__ import annotations

import secrets as tokens
import time

from cryptography.fernet import MultiFernet
from sqlalchemy import case, delete, func, select
from sqlalchemy.orm import Session

from flux.domain.hooks import HookEvent, HookEventType
from flux.server import outbox
from flux.server.errors import Conflict, NotFound
from flux.server.hook_models import HookAttemptModel, HookDeliveryModel, HookModel
from flux.server.hooks.schemas import AttemptInfo, DeliveryInfo, HookCreate, HookInfo
from flux.server.namespaces import require_active
from flux.server.secrets import NO_KEY

#: Deliveries ``GET /hooks/NAME/deliveries`` shows at most, newest first.
SHOWN = 100


def _info(row: HookModel, pending: int = 0, dead: int = 0, secret: str | None = None) -> HookInfo:
    return HookInfo(
        name=row.name,
        namespace=row.namespace,
        url=row.url,
        events=row.events,
        workflow=row.workflow,
        created_at=row.created_at,
        secret=secret,
        pending=pending,
        dead=dead,
    )


def get_row(session: Session, namespace: str, name: str) -> HookModel:
    row = session.scalars(select(HookModel).where(HookModel.namespace == namespace, HookModel.name == name)).first()
    if row is None:
        raise NotFound(f"hook {name!r} not found")
    return row


def require_key(keys: MultiFernet | None) -> MultiFernet:
    """The secrets key a hook's secret is encrypted with (409 without one)."""
    if keys is None:
        raise Conflict(f"a hook's signing secret is stored encrypted, and {NO_KEY[len('the ') :]}")
    return keys


def create(session: Session, keys: MultiFernet, namespace: str, body: HookCreate) -> HookInfo:
    """A hook of ``namespace`` (its URL already checked by the caller: ``sending.check_url``)."""
    require_active(session, namespace)
    if (
        session.scalar(select(HookModel.id).where(HookModel.namespace == namespace, HookModel.name == body.name))
        is not None
    ):
        raise Conflict(f"hook {body.name!r} already exists (delete it first)")
    made = None if body.secret else f"whsec_{tokens.token_urlsafe(32)}"
    row = HookModel(
        namespace=namespace,
        name=body.name,
        url=body.url,
        events=body.events,
        workflow=body.workflow,
        secret_encrypted=keys.encrypt((body.secret or made).encode()).decode(),
        created_at=time.time(),
    )
    session.add(row)
    session.flush()
    return _info(row, secret=made)


def _counts(session: Session, hook_ids: list[int]) -> dict[int, tuple[int, int]]:
    """hook id -> (pending, dead) deliveries."""
    d = HookDeliveryModel
    rows = session.execute(
        select(
            d.hook_id,
            func.sum(case((d.state == outbox.PENDING, 1), else_=0)),
            func.sum(case((d.state == outbox.DEAD, 1), else_=0)),
        )
        .where(d.hook_id.in_(hook_ids))
        .group_by(d.hook_id)
    )
    return {hook_id: (int(pending or 0), int(dead or 0)) for hook_id, pending, dead in rows}


def list_all(session: Session, namespace: str) -> list[HookInfo]:
    rows = list(session.scalars(select(HookModel).where(HookModel.namespace == namespace).order_by(HookModel.name)))
    counts = _counts(session, [row.id for row in rows])
    return [_info(row, *counts.get(row.id, (0, 0))) for row in rows]


def show(session: Session, namespace: str, name: str) -> HookInfo:
    row = get_row(session, namespace, name)
    return _info(row, *_counts(session, [row.id]).get(row.id, (0, 0)))


def delete_hook(session: Session, namespace: str, name: str) -> None:
    """Its deliveries go with it (their attempts by cascade)."""
    row = get_row(session, namespace, name)
    session.execute(
        delete(HookAttemptModel).where(
            HookAttemptModel.delivery_seq.in_(select(HookDeliveryModel.seq).where(HookDeliveryModel.hook_id == row.id))
        )
    )
    session.execute(delete(HookDeliveryModel).where(HookDeliveryModel.hook_id == row.id))
    session.delete(row)


# --- deliveries ----------------------------------------------------------------------------


def _delivery(row: HookDeliveryModel, attempts: list[HookAttemptModel], with_body: bool = False) -> DeliveryInfo:
    return DeliveryInfo(
        id=row.id,
        type=row.type,
        state=row.state,
        created_at=row.created_at,
        next_attempt_at=row.next_attempt_at if row.state == outbox.PENDING else None,
        finished_at=row.finished_at,
        attempts=[
            AttemptInfo(number=a.number, at=a.at, status_code=a.status_code, latency=a.latency, error=a.error)
            for a in attempts
        ],
        body=row.body if with_body else None,
    )


def _attempts(session: Session, seqs: list[int]) -> dict[int, list[HookAttemptModel]]:
    found: dict[int, list[HookAttemptModel]] = {}
    query = select(HookAttemptModel).where(HookAttemptModel.delivery_seq.in_(seqs)).order_by(HookAttemptModel.number)
    for attempt in session.scalars(query):
        found.setdefault(attempt.delivery_seq, []).append(attempt)
    return found


def deliveries(session: Session, namespace: str, name: str, limit: int = SHOWN) -> list[DeliveryInfo]:
    """The hook's newest deliveries, each with its attempts."""
    hook = get_row(session, namespace, name)
    query = (
        select(HookDeliveryModel)
        .where(HookDeliveryModel.hook_id == hook.id)
        .order_by(HookDeliveryModel.seq.desc())
        .limit(limit)
    )
    rows = list(session.scalars(query))
    attempts = _attempts(session, [row.seq for row in rows])
    return [_delivery(row, attempts.get(row.seq, [])) for row in rows]


def _delivery_row(session: Session, namespace: str, name: str, delivery_id: str) -> HookDeliveryModel:
    hook = get_row(session, namespace, name)
    row = session.scalars(
        select(HookDeliveryModel).where(HookDeliveryModel.id == delivery_id, HookDeliveryModel.hook_id == hook.id)
    ).first()
    if row is None:
        raise NotFound(f"delivery {delivery_id!r} of hook {name!r} not found")
    return row


def delivery(session: Session, namespace: str, name: str, delivery_id: str) -> DeliveryInfo:
    row = _delivery_row(session, namespace, name, delivery_id)
    return _delivery(row, _attempts(session, [row.seq]).get(row.seq, []), with_body=True)


def redeliver(session: Session, namespace: str, name: str, delivery_id: str, max_age: float) -> DeliveryInfo:
    """Send it again, under the same id, now and for another ``max_age``: a receiver
    that deduplicates by id ignores one it already processed (redelivery is for those
    it missed). 409 while it is still pending."""
    row = _delivery_row(session, namespace, name, delivery_id)
    if row.state == outbox.PENDING:
        raise Conflict(
            f"delivery {delivery_id} is still pending (attempt {row.attempts + 1} at {row.next_attempt_at:.0f})"
        )
    now = time.time()
    row.state, row.next_attempt_at, row.expires_at, row.finished_at = outbox.PENDING, now, now + max_age, None
    session.flush()
    outbox.wake_on_commit(session)
    return _delivery(row, _attempts(session, [row.seq]).get(row.seq, []))


def test(session: Session, namespace: str, name: str) -> DeliveryInfo:
    """A ``hook.test`` delivery to this hook alone, through the outbox like any other."""
    hook = get_row(session, namespace, name)
    event = HookEvent(HookEventType.HOOK_TEST, f"hook:{hook.name}", namespace, {"hook": hook.name, "url": hook.url})
    [delivery_id] = outbox.deliver_to(session, event, [hook.id])
    return delivery(session, namespace, name, delivery_id)
