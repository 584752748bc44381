"""The outbox and the delivery loop's transactions on a real database
(flux.server.outbox, flux.server.hooks.delivery): a delivery exists exactly when its
change committed; a subject's deliveries go in order; slots, age and deleted hooks."""

import shutil
import time

import pytest
from cryptography.fernet import Fernet, MultiFernet

from flux.domain.hooks import HookEvent, HookEventType
from flux.server import outbox
from flux.server.database import Database, migrate
from flux.server.hook_models import HookDeliveryModel
from flux.server.hooks import delivery, store
from flux.server.hooks.schemas import HookCreate
from flux.server.hooks.sending import Outcome

FAILED = HookEventType.EXECUTION_FAILED
KEYS = MultiFernet([Fernet(Fernet.generate_key())])


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """A migrated database file, copied for each test (migrating takes seconds)."""
    path = tmp_path_factory.mktemp("outbox") / "template.db"
    migrate(f"sqlite:///{path}")
    return path


def opened(url: str):
    """The database with one hook, and this replica's copy of the subscriptions."""
    database = Database(url)
    copy = outbox.Subscriptions(max_age=60.0)
    database.context[outbox.SLOT] = copy
    database.transaction(
        lambda s: store.create(
            s, KEYS, "default", HookCreate(name="h", url="https://example.com/x", events=["execution.failed"])
        )
    )
    copy.hooks = database.transaction(outbox.subscriptions)
    return database


@pytest.fixture
def db(tmp_path, migrated):
    shutil.copy(migrated, tmp_path / "outbox.db")
    database = opened(f"sqlite:///{tmp_path / 'outbox.db'}")
    yield database
    database.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def both(request, db):
    """SQLite, and PostgreSQL (where the claim is FOR UPDATE SKIP LOCKED)."""
    if request.param == "sqlite":
        yield db
        return
    url = request.getfixturevalue("pg_url")
    migrate(url)
    database = opened(url)
    yield database
    database.close()


def event(subject: str = "e1") -> HookEvent:
    return HookEvent(FAILED, subject, "default", {"execution_id": subject}, workflow="wf")


def states(db: Database) -> list[str]:
    return db.transaction(lambda s: [row.state for row in s.query(HookDeliveryModel).order_by(HookDeliveryModel.seq)])


def test_a_delivery_exists_exactly_when_its_transaction_committed(db):
    def rolled_back(session):
        outbox.enqueue(session, event())
        raise RuntimeError("the state change failed")

    with pytest.raises(RuntimeError):
        db.transaction(rolled_back)
    assert states(db) == []
    assert db.transaction(lambda s: outbox.enqueue(s, event())) == 1
    assert db.transaction(lambda s: outbox.enqueue(s, HookEvent(FAILED, "e2", "elsewhere", {}))) == 0
    assert states(db) == ["pending"]


def test_the_delivery_loop_is_woken_after_a_commit_that_enqueued_only(db):
    """``outbox.committed`` as the server registers it (``Database.after_commit``)."""
    woken = []
    db.context[outbox.SLOT].wake = lambda: woken.append("woken")
    db.after_commit(outbox.committed)

    def rolled_back(session):
        outbox.enqueue(session, event())
        raise RuntimeError("the state change failed")

    with pytest.raises(RuntimeError):
        db.transaction(rolled_back)
    db.transaction(lambda s: None)
    assert woken == []
    db.transaction(lambda s: outbox.enqueue(s, event()))
    assert woken == ["woken"] and states(db) == ["pending"]  # once


def test_a_subjects_later_delivery_waits_for_the_earlier_one(both):
    for subject in ("e1", "e1", "e2"):
        both.transaction(lambda s, subject=subject: outbox.enqueue(s, event(subject)))
    jobs = both.transaction(lambda s: delivery.claim(s, time.time(), set(), {}, lease=30))
    assert [job.body["data"]["execution_id"] for job in jobs] == ["e1", "e2"]
    assert (
        both.transaction(lambda s: delivery.claim(s, time.time() + 60, set(), {}, lease=30)) == []
    )  # leased, and blocked
    both.transaction(lambda s: delivery.record(s, jobs[0], Outcome(200, 0.01, None), base=1.0))
    after = both.transaction(lambda s: delivery.claim(s, time.time(), set(), {}, lease=30))
    assert [job.seq for job in after] == [jobs[0].seq + 1]


def test_a_failure_is_retried_later_until_its_age_then_dead(db):
    db.transaction(lambda s: outbox.enqueue(s, event()))
    [job] = db.transaction(lambda s: delivery.claim(s, time.time(), set(), {}, lease=30))
    assert db.transaction(lambda s: delivery.record(s, job, Outcome(500, 0.01, "HTTP 500"), base=1.0)) == "pending"
    assert db.transaction(lambda s: delivery.claim(s, time.time(), set(), {}, lease=30)) == []  # backing off
    [again] = db.transaction(lambda s: delivery.claim(s, time.time() + 1.0, set(), {}, lease=30))
    assert again.number == 2
    assert (
        db.transaction(lambda s: delivery.record(s, again, Outcome(None, 0.01, "refused"), base=100.0)) == "dead"
    )  # past 60 s


def test_a_full_hook_gets_no_more_and_a_deleted_hooks_deliveries_go(db):
    for subject in ("a", "b", "c"):
        db.transaction(lambda s, subject=subject: outbox.enqueue(s, event(subject)))
    hook_id = db.context[outbox.SLOT].hooks[0].id
    assert len(db.transaction(lambda s: delivery.claim(s, time.time(), set(), {hook_id: 2}, lease=30))) == 2
    assert db.transaction(lambda s: delivery.claim(s, time.time(), {hook_id}, {}, lease=30)) == []
    db.transaction(lambda s: store.delete_hook(s, "default", "h"))
    assert states(db) == []


def test_finished_deliveries_are_pruned_after_a_while_pending_ones_never(db):
    for subject in ("a", "b"):
        db.transaction(lambda s, subject=subject: outbox.enqueue(s, event(subject)))
    job = db.transaction(lambda s: delivery.claim(s, time.time(), set(), {}, lease=30))[0]
    db.transaction(lambda s: delivery.record(s, job, Outcome(204, 0.01, None), base=1.0))
    assert db.transaction(lambda s: delivery.prune(s, time.time() - 60)) == 0
    assert db.transaction(lambda s: delivery.prune(s, time.time() + 1)) == 1
    assert states(db) == ["pending"]
