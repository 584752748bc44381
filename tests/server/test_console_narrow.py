"""The console on a phone (390 px) and a laptop (1280 px), in a real browser against a
real server and worker (docs/console.md#narrow-screens): no main page scrolls sideways,
nor does any table in its box; on a phone every table is a stack of cards, an
execution's state and why come first, a queued one's reason too, the Cancel button and
the timeline's When and Value are on screen; every filter's label sits beside its field.
Screenshots go where tests/server/test_console.py says (FLUX_CONSOLE_SCREENSHOTS)."""

from __future__ import annotations

import os
import re
import textwrap

import httpx
import pytest
from test_console import WORKFLOWS, browser, expect, shots  # noqa: F401 - fixtures; skips with them
from waiting import eventually

from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.browser]

ADMIN = "console-narrow-admin-token-0123456789"
BEARER = {"Authorization": f"Bearer {ADMIN}"}
PHONE, LAPTOP = 390, 1280


@pytest.fixture(scope="module")
def lived(tmp_path_factory):
    """A guarded server (the audit page needs a token) with one worker, and one execution
    in each state a page shows: completed, failed, running, waiting for a worker."""
    home = tmp_path_factory.mktemp("console-narrow")
    source = home / "flows.py"
    source.write_text(textwrap.dedent(WORKFLOWS))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLUX_API_TOKEN", ADMIN)  # the worker, the client and the cluster's own waits use it
        with LocalCluster(home / "home", server_args=("--api-token", ADMIN)) as cluster:
            cluster.start_server()
            cluster.start_worker("w1", labels={"zone": "a"}, max_concurrent_executions=2)
            with FluxClient(cluster.server_url, api_token=ADMIN) as client:
                client.register_file(source)
                runs = {
                    "done": client.run("quick", {"name": "Ada"}, wait=30)["id"],
                    "failed": client.run("broken", wait=30)["id"],
                    "running": client.run("sleepy")["id"],
                    "pending": client.run("huge")["id"],
                }
                client.create_namespace("frozen")
                client.update_namespace("frozen", quota={"executions": 0})
                with FluxClient(cluster.server_url, api_token=ADMIN, namespace="frozen") as frozen:
                    frozen.register_file(source)
                    runs["held"] = frozen.run("quick")["id"]  # held by its quota alone: w1 has a free slot
                eventually(lambda: client.execution(runs["running"])["state"] == "RUNNING", 30, "sleepy never ran")
                eventually(lambda: client.execution(runs["pending"])["placement_note"], 30, "no placement note")
                client.create_pool("gpu", "command", resources={"gpu": 1}, max=2, options={"command": ["true"]})
                # a call with a long unbroken target: the audit page wraps it in its cell, at any width
                long = httpx.post(f"{cluster.server_url}/executions/{'f' * 200}/cancel", headers=BEARER)
                assert long.status_code == 404
                yield cluster, runs


def signed_in(browser, cluster, width: int):  # noqa: F811 - the fixture, passed on
    context = browser.new_context(viewport={"width": width, "height": 844}, base_url=cluster.server_url)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto("/ui/login")
    page.fill("#token", ADMIN)
    page.click("button:has-text('Sign in')")
    expect(page).to_have_url(re.compile(r"/ui/fleet$"))
    return context, page


def fits(page, url: str) -> None:
    """The page does not scroll sideways, nor does any table's box."""
    page.goto(url)
    page.wait_for_load_state("load")
    width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width <= inner, f"{url} scrolls sideways at {inner} px ({width} px wide)"
    boxes = page.evaluate(
        "[...document.querySelectorAll('.table-wrap')]"
        ".map(b => [b.scrollWidth, b.clientWidth, b.querySelector('table').className])"
    )
    for scrolled, shown, table in boxes:
        assert scrolled <= shown + 1, f"{url}: table {table} is {scrolled} px in a {shown} px box"


def labels_beside_fields(page) -> None:
    """Each filter's label sits on its field's line, just before it."""
    pairs = page.evaluate(
        """[...document.querySelectorAll('form.filters label[for]')].map(l => {
             const f = document.getElementById(l.htmlFor), a = l.getBoundingClientRect(), b = f.getBoundingClientRect();
             return [l.htmlFor, a.right, a.top, a.bottom, b.left, b.top, b.bottom];
           })"""
    )
    assert pairs, "no filters on the page"
    for name, right, top, bottom, left, field_top, field_bottom in pairs:
        assert top < field_bottom and field_top < bottom, f"label of {name} is not on its field's line"
        assert 0 <= left - right <= 24, f"label of {name} is {left - right:.0f} px from its field"


def on_screen(page, locator) -> None:
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"] + 0.5, box


@pytest.mark.parametrize("width", [PHONE, LAPTOP])
def test_no_main_page_scrolls_sideways_and_labels_sit_beside_their_fields(browser, lived, shots, width):  # noqa: F811
    cluster, runs = lived
    context, page = signed_in(browser, cluster, width)
    try:
        for url in (
            "/ui/fleet",
            "/ui/executions",
            f"/ui/executions/{runs['done']}",
            f"/ui/executions/{runs['failed']}",
            f"/ui/executions/{runs['pending']}",
            "/ui/queue",
            "/ui/audit",
            "/ui/workflows",
            "/ui/workflows/quick",
            "/ui/schedules",
        ):
            fits(page, url)
            if url == "/ui/audit":
                expect(page.locator("table.audit")).to_contain_text("f" * 200)
            if page.locator("form.filters").count():
                labels_beside_fields(page)
            name = re.sub(r"[^a-z]+", "-", url.removeprefix("/ui/").split("?")[0][:30]).strip("-")
            page.screenshot(path=shots / f"{name}-{width}.png", full_page=True)
    finally:
        context.close()


def test_on_a_phone_an_executions_state_and_why_come_first_and_cancel_is_on_screen(browser, lived):  # noqa: F811
    cluster, runs = lived
    context, page = signed_in(browser, cluster, PHONE)
    try:
        page.goto("/ui/executions")
        pending = page.locator(f'tr[data-id="{runs["pending"]}"]')
        cells = pending.locator("td:visible")
        tops = [cells.nth(i).bounding_box()["y"] for i in range(cells.count())]
        state = pending.locator("td.st")
        assert state.bounding_box()["y"] == min(tops), "the state is not the card's first line"
        expect(state.locator(".badge")).to_have_text("SCHEDULED")
        expect(state.locator(".why")).to_contain_text("1 Insufficient cpu")
        on_screen(page, state.locator(".why"))
        on_screen(page, pending.locator("button:has-text('Cancel')"))
        on_screen(page, pending.locator("td.wk"))
        label = pending.locator("td.wf").evaluate("td => getComputedStyle(td, '::before').content")
        assert label == '"Workflow"', label  # each cell under its column's name

        page.goto("/ui/queue")
        why = page.locator(f'tr[data-id="{runs["pending"]}"] td.why-waits')
        on_screen(page, why)
        expect(why).to_contain_text("Insufficient cpu")
        row_top = page.locator(f'tr[data-id="{runs["pending"]}"]').bounding_box()["y"]
        assert why.bounding_box()["y"] - row_top < 12, "the reason is not the queue card's first line"

        page.goto(f"/ui/executions/{runs['done']}")
        last = page.locator("table.timeline tbody tr").last
        on_screen(page, last.locator("td[data-label='When']"))
        on_screen(page, last.locator("td.value"))
        page.goto(f"/ui/executions/{runs['pending']}")
        on_screen(page, page.locator("table.placement td[data-label='Reason']").first)

        page.goto(f"/ui/executions/{runs['held']}?namespace=frozen")  # the quota leads, as the CLI and API say
        summary = page.locator("[data-placement-summary]")
        expect(summary).to_contain_text("held by namespace frozen's quota: executions 0/0 hold a worker; 1/1 workers")
        assert summary.get_attribute("data-binding") == "quota"
        on_screen(page, summary)
        if os.environ.get("FLUX_CONSOLE_SCREENSHOTS"):
            page.screenshot(
                path=os.path.join(os.environ["FLUX_CONSOLE_SCREENSHOTS"], "pending-390.png"), full_page=True
            )
    finally:
        context.close()


@pytest.mark.parametrize("width", [PHONE, LAPTOP])
def test_a_quota_bars_name_sits_before_its_bar_never_over_it(browser, lived, width):  # noqa: F811
    """The queue page's quota bar named ``executions`` (wider than cpu or memory) ends
    before its bar begins, on a phone and a laptop."""
    cluster, _ = lived
    context, page = signed_in(browser, cluster, width)
    try:
        page.goto("/ui/queue?namespace=frozen")
        meter = page.locator(".meter", has_text="executions")
        expect(meter.locator(".meter-text")).to_have_text("0 / 0")
        text_ends, bar_starts = meter.evaluate(
            """m => { const r = document.createRange(), bar = m.querySelector('span.bar');
                      r.selectNodeContents(m.querySelector('.meter-label'));
                      return [r.getBoundingClientRect().right, bar.getBoundingClientRect().left]; }"""
        )  # the text's own box: a grid column narrower than the word lets it run over the bar
        assert text_ends <= bar_starts, (text_ends, bar_starts)
        on_screen(page, meter.locator("span.bar"))
    finally:
        context.close()
