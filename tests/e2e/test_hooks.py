"""Webhooks through real processes (docs/hooks.md): a receiver on loopback (allowed by
--hooks-allow-private) gets every event once per delivery id across a server SIGKILL;
a failing endpoint is retried; a hanging one delays neither placement nor other hooks;
the documented receiver verifies real signatures; private addresses are refused."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from receivers import Receiver
from shared import HELLO, error_line, flux
from waiting import eventually

from flux.client import FluxClient, FluxClientError
from flux.domain.hooks import SIGNATURE_HEADER, verify

SECRET = "s3cret-of-the-tests-0123456789"
ALLOW = ("--hooks-allow-private", "--hooks-backoff", "0.2", "--hooks-timeout", "2")
EXECUTION_EVENTS = ["execution.scheduled", "execution.started", "execution.completed"]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"


@pytest.fixture
def receivers():
    made: list[Receiver] = []

    def make(**kwargs) -> Receiver:
        made.append(Receiver(**kwargs))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


@pytest.fixture
def hooked(make_cluster, monkeypatch):
    """A server with a secrets key that lets hooks reach loopback, retrying fast."""
    monkeypatch.setenv("FLUX_SECRETS_KEY", Fernet.generate_key().decode())
    return lambda *args: make_cluster(server_args=(*ALLOW, *args))


def _all_delivered(client: FluxClient, name: str) -> list[dict] | None:
    found = client.hook_deliveries(name)
    return found if all(d["state"] == "delivered" for d in found) else None


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_every_event_arrives_once_per_delivery_id_across_a_server_sigkill(hooked, receivers, workflow_file):
    receiver = receivers(hang=0.05)  # slow enough that deliveries are pending when the server dies
    cluster = hooked()
    with FluxClient(cluster.server_url) as client:
        client.create_hook("all", receiver.url, EXECUTION_EVENTS, secret=SECRET)
        client.register(workflow_file(HELLO))
        cluster.start_worker("w1")
        ids = [client.run("hello", f"n{i}")["id"] for i in range(6)]
        eventually(lambda: len(receiver.bodies()) >= 3, 30, "no delivery before the kill")
    cluster.stop_server(signal.SIGKILL)
    more = []
    cluster.start_server()
    with FluxClient(cluster.server_url) as client:
        more = [client.run("hello", f"m{i}")["id"] for i in range(3)]
        for execution_id in ids + more:
            assert client.wait(execution_id, 60)["state"] == "COMPLETED"
        expected = {(execution_id, event) for execution_id in ids + more for event in EXECUTION_EVENTS}

        def arrived() -> set:
            return {(b["data"]["execution_id"], b["type"]) for b in receiver.bodies()}

        eventually(lambda: arrived() >= expected, 60, f"missing: {expected - arrived()}")
        outbox = {
            d["id"]: d for d in eventually(lambda: _all_delivered(client, "all"), 10, "not all recorded as delivered")
        }
    bodies = receiver.bodies()
    by_event: dict[tuple, set[str]] = {}
    for body in bodies:
        by_event.setdefault((body["data"]["execution_id"], body["type"]), set()).add(body["id"])
    assert all(len(delivery_ids) == 1 for delivery_ids in by_event.values()), by_event  # one delivery id per event
    assert set(by_event) == expected
    assert {body["id"] for body in bodies} == set(outbox)
    for execution_id in ids + more:  # each execution's events in order, first arrivals
        first = [b["type"] for b in bodies if b["data"]["execution_id"] == execution_id]
        assert list(dict.fromkeys(first)) == EXECUTION_EVENTS, first
    for record in receiver.received:
        assert verify(SECRET, record["headers"][SIGNATURE_HEADER], record["raw"])
        assert record["headers"]["Flux-Delivery"] == record["body"]["id"]


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_an_endpoint_answering_500_three_times_is_retried_until_it_succeeds(hooked, receivers):
    receiver = receivers(answers=[500, 500, 500])
    cluster = hooked()
    created = json.loads(
        flux(
            "hook",
            "create",
            "flaky",
            "--url",
            receiver.url,
            "--event",
            "execution.failed",
            "--format",
            "json",
            server_url=cluster.server_url,
        ).stdout
    )
    assert created["secret"].startswith("whsec_")  # made by the server, shown this once
    with FluxClient(cluster.server_url) as client:
        assert client.show_hook("flaky")["secret"] is None
        delivery = client.test_hook("flaky")
        done = eventually(
            lambda: (d := client.hook_delivery("flaky", delivery["id"]))["state"] != "pending" and d,
            30,
            "never delivered",
        )
        assert done["state"] == "delivered"
        assert [a["status_code"] for a in done["attempts"]] == [500, 500, 500, 200]
        assert all(a["latency"] >= 0 for a in done["attempts"])
        gaps = [b["at"] - a["at"] for a, b in zip(done["attempts"], done["attempts"][1:])]
        # backing off: 0.1-0.2 s, then 0.2-0.4, then 0.4-0.8. A loaded machine only lengthens a gap,
        # so each one's lower bound is what is checked (comparing two gaps failed on CI under load)
        assert all(gap >= 0.1 * 2**i - 0.01 for i, gap in enumerate(gaps)), gaps
    assert {b["id"] for b in receiver.bodies()} == {delivery["id"]}
    flux("hook", "redeliver", "flaky", delivery["id"], server_url=cluster.server_url)
    with FluxClient(cluster.server_url) as client:
        eventually(lambda: len(client.hook_delivery("flaky", delivery["id"])["attempts"]) == 5, 10, "never redelivered")
    assert {b["id"] for b in receiver.bodies()} == {delivery["id"]}  # the same id: a receiver deduplicates it
    shown = json.loads(flux("hook", "show", "flaky", "--format", "json", server_url=cluster.server_url).stdout)
    assert [(d["id"], d["state"], len(d["attempts"])) for d in shown["deliveries"]] == [
        (delivery["id"], "delivered", 5)
    ]
    assert "delivered" in flux("hook", "show", "flaky", server_url=cluster.server_url, env={"COLUMNS": "200"}).stdout
    metrics = FluxClient(cluster.server_url)._http.get("/metrics").text
    assert re.search(r'flux_hook_deliveries_total\{outcome="failed"\} 3\.0', metrics)
    assert re.search(r'flux_hook_deliveries_total\{outcome="delivered"\} 2\.0', metrics)
    assert re.search(r"flux_hook_outbox_age_seconds 0\.0", metrics)


@pytest.mark.timeout(120)
def test_a_hanging_endpoint_delays_neither_placement_nor_other_hooks(
    make_cluster, monkeypatch, receivers, workflow_file
):
    """Runs of a namespace whose every event goes to a hanging hook, alternated with
    runs of one without hooks: every run completes and the healthy hook hears of each
    while the hanging endpoint still holds every request it got (none answered). That
    submit->claimed is the same with and without it is a figure: ``bench.b49_reactions``
    (``B49.claim_ms``)."""
    monkeypatch.setenv("FLUX_SECRETS_KEY", Fernet.generate_key().decode())
    cluster = make_cluster(server_args=("--hooks-allow-private", "--hooks-timeout", "300"))
    hanging, healthy = receivers(hang=300), receivers()  # hangs past the test's own timeout
    with FluxClient(cluster.server_url) as plain, FluxClient(cluster.server_url, namespace="hooked") as hooked:
        plain.create_namespace("hooked")
        for client in (plain, hooked):
            client.register(workflow_file(HELLO))
        hooked.create_hook("hangs", hanging.url, EXECUTION_EVENTS, secret=SECRET)
        hooked.create_hook("healthy", healthy.url, ["execution.completed"], secret=SECRET)
        cluster.start_worker("w1")
        for i in range(14):
            for client in (plain, hooked):
                assert client.run("hello", f"x{i}", wait=60)["state"] == "COMPLETED"
        eventually(lambda: len(healthy.bodies()) >= 14, 60, "the healthy hook waited on the hanging one")
        assert hanging.bodies() and hanging.answered == 0  # all of that while the hanging POSTs still hang
    assert len(hanging.bodies()) <= 4  # its four slots, nothing more while they hang


def _documented_receiver() -> dict:
    """The receiver block of docs/hooks.md, run as it is written (its __main__ part aside)."""
    text = DOCS.read_text()
    code = text.split("<!-- receiver -->\n```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 16
    namespace: dict = {"__name__": "documented_receiver"}
    exec(compile(code, str(DOCS), "exec"), namespace)  # noqa: S102 - the documentation's own code
    return namespace


@pytest.mark.timeout(60)
def test_the_documented_receiver_verifies_real_deliveries(hooked, receivers, monkeypatch):
    example = _documented_receiver()
    monkeypatch.setenv("FLUX_HOOK_SECRET", SECRET)
    receiver = receivers(handler=example["Receiver"])
    cluster = hooked()
    with FluxClient(cluster.server_url) as client:
        client.create_hook("documented", receiver.url, ["execution.failed"], secret=SECRET)
        delivery = client.test_hook("documented")
        done = eventually(
            lambda: (d := client.hook_delivery("documented", delivery["id"]))["attempts"] and d, 30, "no attempt"
        )
        assert done["attempts"][0]["status_code"] == 204  # the example verified the signature
        tested = flux("hook", "test", "documented", server_url=cluster.server_url, env={"COLUMNS": "200"})
        assert "delivered" in tested.stdout and "204" in tested.stdout
        client.delete_hook("documented")
        client.create_hook("documented", receiver.url, ["execution.failed"], secret="another-secret-0123456789")
        refused = client.test_hook("documented")
        done = eventually(
            lambda: (d := client.hook_delivery("documented", refused["id"]))["attempts"] and d, 30, "no attempt"
        )
        assert done["attempts"][0]["status_code"] == 401  # a wrong secret does not verify
    header, body = "t=1,v1=00", b"{}"
    assert not example["verified"](SECRET.encode(), header, body)


PRIVATE = [
    "http://127.0.0.1:9/x",
    "http://169.254.169.254/latest",
    "http://10.1.2.3/",
    "http://[::1]:8080/",
    "http://localhost/",
    "https://100.64.0.1/",
]


@pytest.mark.timeout(60)
def test_a_url_to_the_servers_own_network_is_refused(make_cluster, monkeypatch):
    monkeypatch.setenv("FLUX_SECRETS_KEY", Fernet.generate_key().decode())
    cluster = make_cluster()
    with FluxClient(cluster.server_url) as client:
        for url in PRIVATE:
            with pytest.raises(FluxClientError, match="hooks may not reach the server's own network") as refused:
                client.create_hook("inside", url, ["execution.failed"])
            assert refused.value.status == 422, url
        assert client.list_hooks() == []
    line = error_line(
        flux(
            "hook",
            "create",
            "inside",
            "--url",
            PRIVATE[0],
            "--event",
            "execution.failed",
            server_url=cluster.server_url,
            check=False,
        )
    )
    assert "--hooks-allow-private" in line


@pytest.mark.timeout(60)
def test_without_a_secrets_key_a_hook_is_refused_naming_the_fix(make_cluster, monkeypatch, pg_url):
    """On SQLite the server makes its key on first start (docs/tasks.md#secrets); a PostgreSQL
    server is given none (each replica would make its own), so it has no key until told one."""
    monkeypatch.delenv("FLUX_SECRETS_KEY", raising=False)
    cluster = make_cluster(server_args=("--hooks-allow-private",), database_url=pg_url)
    with FluxClient(cluster.server_url) as client:
        with pytest.raises(FluxClientError, match="FLUX_SECRETS_KEY or --secrets-key-file") as refused:
            client.create_hook("keyless", "https://example.com/hook", ["execution.failed"], secret=SECRET)
        assert refused.value.status == 409
        assert client.list_hooks() == []
