"""An execution's output log on the server (docs/logs.md): the worker's
``POST /executions/{id}/logs`` (fenced like a checkpoint), the pages of
``GET /executions/{id}/logs`` with their filters, and the Server-Sent Events streams
that follow logs and events. A real server process; the worker is ``ProtocolWorker``,
so every batch is one the test wrote."""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Iterator

import httpx
import pytest
from protocol import ONE_TASK, ProtocolWorker, metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from waiting import eventually

from flux.client import FluxClient
from flux.local import LocalCluster
from flux.server.database import make_engine
from flux.server.models import ExecutionLogModel, ExecutionModel

pytestmark = pytest.mark.integration


class Held:
    """A worker holding one execution of ``one_task``, and a client."""

    def __init__(self, cluster: LocalCluster, workflow_file, name: str = "logger"):
        self.cluster = cluster
        self.worker = ProtocolWorker(cluster.server_url, cluster.home, name, heartbeat_interval=5)
        self.worker.register()
        self.client = FluxClient(cluster.server_url)
        self.client.register_file(workflow_file(ONE_TASK))
        self.execution_id = self.client.run("one_task", 1)["id"]
        self.job = eventually(lambda: self.worker.claim(wait=2)["executions"], 10, "never claimed")[0]
        self.batch = 0

    def post(
        self,
        lines: list[dict],
        batch: int | None = None,
        attempt: int | None = None,
        truncated: bool = False,
        worker: ProtocolWorker | None = None,
    ) -> httpx.Response:
        if batch is None:
            self.batch += 1
            batch = self.batch
        body = {"attempt": attempt or self.job["attempt"], "batch": batch, "lines": lines, "truncated": truncated}
        return (worker or self.worker).post(f"/executions/{self.execution_id}/logs", body)

    def logs(self, **params) -> dict:
        reply = httpx.get(f"{self.cluster.server_url}/executions/{self.execution_id}/logs", params=params, timeout=10)
        assert reply.status_code == 200, reply.text
        return reply.json()

    def checkpoint(self, batch: int, *types: str) -> None:
        events = [
            {"type": t, "name": "one_task", "value": "done" if t == "WORKFLOW_COMPLETED" else None, "time": time.time()}
            for t in types
        ]
        body = {"attempt": self.job["attempt"], "batch": batch, "events": events}
        self.worker.post(f"/executions/{self.execution_id}/checkpoint", body).raise_for_status()

    def close(self) -> None:
        self.worker.close()
        self.client.close()


@pytest.fixture
def held(cluster, workflow_file) -> Iterator[Held]:
    held = Held(cluster, workflow_file)
    yield held
    held.close()


def line(
    message: str,
    stream: str = "stdout",
    task_id: str | None = None,
    level: str | None = None,
    logger: str | None = None,
) -> dict:
    return {
        "time": time.time(),
        "stream": stream,
        "task_id": task_id,
        "level": level,
        "logger": logger,
        "message": message,
    }


def messages(page: dict) -> list[str]:
    return [entry["message"] for entry in page["lines"]]


class Stream:
    """An SSE stream read on a thread: each event (a dict of its fields) lands in
    ``events`` with the time it arrived; ``None`` once the stream closed."""

    def __init__(self, url: str, headers: dict | None = None, params: dict | None = None):
        self.events: queue.Queue = queue.Queue()
        self.status: int | None = None
        self._http = httpx.Client(timeout=httpx.Timeout(10, read=30))
        self._args = dict(url=url, headers=headers or {}, params=params or {})
        self._open = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        assert self._open.wait(10), "stream never opened"

    def _read(self) -> None:
        try:
            with self._http.stream("GET", **self._args) as response:
                self.status = response.status_code
                self.content_type = response.headers.get("content-type", "")
                self._open.set()
                event: dict = {}
                for text in response.iter_lines():
                    if not text:
                        if event:
                            self.events.put((time.monotonic(), event))
                        event = {}
                    elif not text.startswith(":"):  # a comment: the keep-alive ping
                        field, _, value = text.partition(":")
                        event[field] = value[1:] if value.startswith(" ") else value
        except httpx.HTTPError:
            pass
        finally:
            self._open.set()
            self.events.put((time.monotonic(), None))

    def next(self, timeout: float = 10) -> dict | None:
        return self.events.get(timeout=timeout)[1]

    def until_end(self, timeout: float = 10) -> list[dict]:
        seen = []
        while (event := self.next(timeout)) is not None:
            seen.append(event)
        return seen

    def close(self) -> None:
        self._http.close()
        self.thread.join(10)


# --- storing and reading -----------------------------------------------------------------


def test_lines_are_stored_and_read_back_in_order_with_a_protocol_worker(held):
    first = held.post(
        [line("hello"), line("oops", "stderr", "echo:1"), line("note", "log", "echo:1", level="INFO", logger="app.db")]
    )
    second = held.post([line("bye")])
    page = held.logs()

    assert first.json() == {"accepted": 3} and second.json() == {"accepted": 1}
    assert [entry["seq"] for entry in page["lines"]] == [1, 2, 3, 4]
    assert messages(page) == ["hello", "oops", "note", "bye"]
    assert page["lines"][2] | {"time": 0} == {
        "seq": 3,
        "attempt": 1,
        "time": 0,
        "stream": "log",
        "task_id": "echo:1",
        "level": "INFO",
        "logger": "app.db",
        "message": "note",
    }
    assert page["next_after"] == 4 and page["truncated"] is False
    assert held.logs(after=4) == {"lines": [], "next_after": 4, "truncated": False}


def test_every_filter_with_a_protocol_worker(held):
    held.post(
        [
            line("body"),
            line("fetch 1", task_id="fetch:1"),
            line("fetch 2", "stderr", task_id="fetch:2"),
            line("fetcher", task_id="fetcher:1"),
            line("underscore", task_id="fetch_x:1"),
            line("debug", "log", "fetch:1", level="DEBUG", logger="a"),
            line("warn", "log", "fetch:1", level="WARNING", logger="a"),
            line("alias", "log", None, level="WARN", logger="a"),
            line("error", "log", None, level="ERROR", logger="a"),
            line("custom", "log", None, level="NOTICE", logger="a"),
            line("flux note", "flux"),
        ]
    )

    assert messages(held.logs(task="fetch")) == ["fetch 1", "fetch 2", "debug", "warn"]
    assert messages(held.logs(task="fetch:2")) == ["fetch 2"]
    assert messages(held.logs(task="fetc_")) == []  # '_' is not a wildcard
    assert messages(held.logs(stream="stderr")) == ["fetch 2"]
    assert messages(held.logs(stream="flux")) == ["flux note"]
    assert messages(held.logs(level="WARNING")) == ["warn", "alias", "error"]
    assert messages(held.logs(level="DEBUG", task="fetch")) == ["debug", "warn"]
    assert messages(held.logs(level="ERROR", stream="stdout")) == []
    assert len(held.logs(attempt=1)["lines"]) == 11 and held.logs(attempt=2)["lines"] == []
    refused = httpx.get(f"{held.cluster.server_url}/executions/{held.execution_id}/logs", params={"level": "LOUD"})
    assert refused.status_code == 422 and refused.json()["code"] == "validation_error"


def test_paging_with_after_and_next_after_with_a_protocol_worker(held):
    held.post([line(f"line {n}", "stderr" if n % 5 == 0 else "stdout") for n in range(1, 26)])

    pages, after = [], 0
    while True:
        page = held.logs(after=after, limit=10)
        pages.append(messages(page))
        if len(page["lines"]) < 10:
            break
        after = page["next_after"]

    assert [len(p) for p in pages] == [10, 10, 5]
    assert sum(pages, []) == [f"line {n}" for n in range(1, 26)]
    # A filtered page that is not full moves next_after to the newest line: a poll never rescans.
    filtered = held.logs(stream="stderr", limit=10)
    assert messages(filtered) == ["line 5", "line 10", "line 15", "line 20", "line 25"] and filtered["next_after"] == 25
    assert held.logs(stream="stderr", limit=2)["next_after"] == 10  # full: the last line given


def test_unknown_executions_are_404_with_a_protocol_worker(cluster, held):
    assert httpx.get(f"{cluster.server_url}/executions/nope/logs").status_code == 404
    assert (
        httpx.get(f"{cluster.server_url}/executions/nope/logs", params={"follow": "true"}).json()["code"] == "not_found"
    )
    assert httpx.get(f"{cluster.server_url}/executions/nope/events", params={"follow": "true"}).status_code == 404
    posted = held.worker.post("/executions/nope/logs", {"attempt": 1, "batch": 1, "lines": []})
    assert posted.status_code == 404


# --- fencing -------------------------------------------------------------------------------


def test_a_resent_batch_is_acknowledged_once_and_a_gap_is_refused_with_a_protocol_worker(held):
    assert held.post([line("a"), line("b")], batch=1).json() == {"accepted": 2}
    assert held.post([line("a"), line("b")], batch=1).json() == {"accepted": 0}  # its answer was lost
    gap = held.post([line("d")], batch=3)
    assert held.post([line("c")], batch=2).json() == {"accepted": 1}

    assert gap.status_code == 409 and gap.json()["code"] == "conflict" and "skips 2" in gap.json()["detail"]
    assert messages(held.logs()) == ["a", "b", "c"]


def test_only_the_holder_may_post_with_a_protocol_worker(held, cluster):
    stranger = ProtocolWorker(cluster.server_url, cluster.home, "stranger", heartbeat_interval=5)
    try:
        stranger.register()
        refused = held.post([line("not mine")], batch=1, worker=stranger)
        anonymous = httpx.post(
            f"{cluster.server_url}/executions/{held.execution_id}/logs", json={"attempt": 1, "batch": 1, "lines": []}
        )
    finally:
        stranger.close()
    assert refused.status_code == 409 and "not held by worker 'stranger'" in refused.json()["detail"]
    assert anonymous.status_code == 401
    assert held.logs()["lines"] == []


def test_a_stale_attempt_is_refused_and_batches_restart_with_the_next_attempt_with_a_protocol_worker(held):
    held.post([line("first attempt")], batch=1)
    held.post([line("more")], batch=2)
    held.worker.register()  # a restart that does not report it: the attempt ends, the execution is requeued
    lost = held.post([line("after the restart")], batch=3)
    held.job = eventually(lambda: held.worker.claim(wait=2)["executions"], 10, "never claimed again")[0]
    stale = held.post([line("late")], batch=3, attempt=1)
    fresh = held.post([line("second attempt")], batch=1)  # numbered from 1 again

    assert held.job["attempt"] == 2
    assert lost.status_code == 409 and stale.status_code == 409 and "stale" in stale.json()["detail"]
    assert fresh.json() == {"accepted": 1}
    assert [(e["attempt"], e["seq"], e["message"]) for e in held.logs()["lines"]] == [
        (1, 1, "first attempt"),
        (1, 2, "more"),
        (2, 3, "second attempt"),
    ]
    assert messages(held.logs(attempt=2)) == ["second attempt"]


def test_lines_in_flight_when_the_execution_completed_are_kept_with_a_protocol_worker(held):
    held.checkpoint(1, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED")
    late = held.post([line("written just before the end")], truncated=True)

    assert held.client.execution(held.execution_id)["state"] == "COMPLETED"
    assert late.json() == {"accepted": 1}
    page = held.logs()
    assert messages(page) == ["written just before the end"] and page["truncated"] is True


def test_limits_with_a_protocol_worker(held):
    huge = "é" * 40_000  # 80,000 bytes of UTF-8
    held.post([line(huge, "log", level="X" * 40, logger="l" * 300)])
    stored = held.logs()["lines"][0]
    too_many = held.post([line("x")] * 5001, batch=2)
    nul = held.post([line("a\x00b")], batch=2)
    long_task = held.post([line("x", task_id="t" * 161)], batch=2)

    assert stored["message"].startswith("é" * 32_768) and stored["message"].endswith(
        "14464 more bytes cut by the server]"
    )
    assert len(stored["level"]) == 16 and len(stored["logger"]) == 128
    assert too_many.status_code == 422 and nul.status_code == 422 and long_task.status_code == 422
    assert held.post([line("after the refusals")], batch=2).json() == {"accepted": 1}  # refused batches use no number


# --- following -----------------------------------------------------------------------------


def test_follow_streams_new_lines_and_ends_once_the_execution_has_with_a_protocol_worker(held):
    held.post([line("before")])
    stream = Stream(f"{held.cluster.server_url}/executions/{held.execution_id}/logs", params={"follow": "true"})
    try:
        first = stream.next()
        held.post([line("live", task_id="echo:1")])
        live = stream.next(timeout=30)  # pushed by the post (how soon: B49.follow_log_ms)
        held.checkpoint(1, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED")
        rest = stream.until_end()
    finally:
        stream.close()

    assert stream.status == 200 and stream.content_type.startswith("text/event-stream")
    assert first["event"] == "log" and first["id"] == "1" and json.loads(first["data"])["message"] == "before"
    assert live["id"] == "2" and json.loads(live["data"]) | {"time": 0} == {
        "seq": 2,
        "attempt": 1,
        "time": 0,
        "stream": "stdout",
        "task_id": "echo:1",
        "level": None,
        "logger": None,
        "message": "live",
    }
    assert [e["event"] for e in rest] == ["end"]
    assert json.loads(rest[0]["data"])["state"] == "COMPLETED"


def test_follow_resumes_after_last_event_id_with_filters_with_a_protocol_worker(held):
    held.post([line(f"out {n}") for n in range(1, 6)] + [line("err", "stderr")])
    held.checkpoint(1, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED")
    url = f"{held.cluster.server_url}/executions/{held.execution_id}/logs"
    resumed = Stream(
        url, headers={"Accept": "text/event-stream", "Last-Event-ID": "3"}, params={"stream": "stdout", "limit": 1}
    )
    try:
        seen = resumed.until_end()
    finally:
        resumed.close()

    assert [(e["event"], e.get("id")) for e in seen] == [("log", "4"), ("log", "5"), ("end", None)]
    plain = httpx.get(url, headers={"Last-Event-ID": "5"}).json()  # JSON unless asked to stream
    assert messages(plain) == ["err"]


def test_events_follow_with_a_protocol_worker(held):
    url = f"{held.cluster.server_url}/executions/{held.execution_id}/events"
    stream = Stream(url, params={"follow": "true", "after": 1})
    try:
        claimed = [stream.next(), stream.next()]
        held.checkpoint(1, "WORKFLOW_STARTED")
        started = stream.next(timeout=30)  # pushed by the checkpoint (how soon: B49.follow_event_ms)
        held.checkpoint(2, "WORKFLOW_COMPLETED")
        rest = stream.until_end()
    finally:
        stream.close()
    listed = httpx.get(url).json()

    assert [json.loads(e["data"])["type"] for e in claimed] == ["WORKFLOW_CLAIMED", "ATTEMPT_STARTED"]
    assert [e["id"] for e in claimed] == ["2", "3"] and {e["event"] for e in claimed} == {"event"}
    assert json.loads(started["data"])["type"] == "WORKFLOW_STARTED"
    assert [json.loads(e["data"])["type"] for e in rest[:-1]] == ["ATTEMPT_ENDED", "WORKFLOW_COMPLETED"]
    assert rest[-1]["event"] == "end" and json.loads(rest[-1]["data"])["output"] == "done"
    assert isinstance(listed, list) and [e["seq"] for e in listed] == list(range(1, len(listed) + 1))


def test_a_stream_ends_with_its_client_and_with_the_server_with_a_protocol_worker(held, cluster):
    baseline = metric(cluster.server_url, "flux_long_poll_waiters")
    url = f"{cluster.server_url}/executions/{held.execution_id}/logs"
    held.post([line("something to read")])
    with httpx.stream("GET", url, params={"follow": "true"}, timeout=10) as left:
        lines = left.iter_lines()  # kept: an iterator dropped closes the response
        assert next(lines) == "id: 1"
        eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") == baseline + 2, 5, "never subscribed")
    eventually(lambda: metric(cluster.server_url, "flux_long_poll_waiters") == baseline, 2, "a gone client still waits")

    staying = Stream(url, params={"follow": "true"})
    first = staying.next()  # the line it had: read before the stop, so the stop cannot race it
    cluster.stop_server()
    closed = staying.until_end()  # the connection closed (None), well before its 30 s read timeout
    staying.close()
    assert first["event"] == "log" and closed == []  # no 'end': reconnect
    assert "Traceback" not in cluster.log("server")


def _count_logs(url: str, execution_id: str) -> int:
    with Session(engine := make_engine(url)) as session:
        count = session.scalar(select(func.count()).where(ExecutionLogModel.execution_id == execution_id))
    engine.dispose()
    return count


def _delete_execution(url: str, execution_id: str) -> None:
    """There is no delete endpoint yet: remove the row as one would (its events go with it by the ORM)
    on the server's own engine (SQLite enforces foreign keys on it)."""
    with Session(engine := make_engine(url)) as session, session.begin():
        session.delete(session.get(ExecutionModel, execution_id))
    engine.dispose()


def test_deleting_an_execution_deletes_its_logs_with_a_protocol_worker(held, cluster):
    held.post([line(f"{n}") for n in range(10)])
    url = f"sqlite:///{cluster.home / 'flux.db'}"
    assert _count_logs(url, held.execution_id) == 10
    _delete_execution(url, held.execution_id)
    assert _count_logs(url, held.execution_id) == 0


def test_postgresql_stores_reads_follows_and_cascades_with_a_protocol_worker(make_cluster, pg_url, workflow_file):
    cluster = make_cluster(database_url=pg_url)
    held = Held(cluster, workflow_file, name="pg-logger")
    try:
        held.post([line("one", task_id="echo:1"), line("two", "log", level="ERROR", logger="x" * 200)])
        assert held.post([line("again")], batch=1).json() == {"accepted": 0}
        page = held.logs()
        stream = Stream(
            f"{cluster.server_url}/executions/{held.execution_id}/logs", params={"follow": "true", "after": 2}
        )
        held.post([line("three")])
        live = stream.next()
        held.checkpoint(1, "WORKFLOW_STARTED", "WORKFLOW_COMPLETED")
        rest = stream.until_end()
        stream.close()
    finally:
        held.close()

    assert messages(page) == ["one", "two"] and len(page["lines"][1]["logger"]) == 128
    assert messages(held.logs(level="ERROR")) == ["two"] and messages(held.logs(task="echo")) == ["one"]
    assert json.loads(live["data"])["message"] == "three" and [e["event"] for e in rest] == ["end"]
    _delete_execution(pg_url, held.execution_id)
    assert _count_logs(pg_url, held.execution_id) == 0
