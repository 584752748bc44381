"""The console's queue page in a real browser against a real server (docs/contention.md):
the current namespace's waiting executions in placement order with why each waits, its
quota as bars of what it holds, its decayed past usage and the work preemptions lost."""

from __future__ import annotations

import textwrap

import pytest
from test_console import browser, expect  # noqa: F401 - the fixture; skips with it: no Playwright or no Chromium

from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.browser]

FLOW = """
    from flux import ResourceRequest, workflow

    @workflow.with_options(requests=ResourceRequest(resources={"accel": 1}))
    async def trainer(ctx):
        return 1
"""


@pytest.fixture(scope="module")
def queued(tmp_path_factory):
    """Namespace ml with a quota; three runs of two priorities waiting (no worker)."""
    home = tmp_path_factory.mktemp("console-queue")
    with LocalCluster(home / "home") as cluster:
        cluster.start_server()
        with FluxClient(cluster.server_url) as admin:
            admin.create_namespace("ml")
            admin.update_namespace("ml", quota={"resources.accel": 4, "executions": 10})
        source = home / "flow.py"
        source.write_text(textwrap.dedent(FLOW))
        with FluxClient(cluster.server_url, namespace="ml") as client:
            client.register_file(source)
            runs = [client.run("trainer", priority=p)["id"] for p in ("low", "critical", "low")]
        yield cluster, runs


def test_the_queue_page_lists_waiting_work_in_placement_order_with_quota_bars(browser, queued, tmp_path):
    cluster, runs = queued
    context = browser.new_context(base_url=cluster.server_url)
    page = context.new_page()
    page.goto("/ui/queue?namespace=ml")
    expect(page.get_by_role("heading", name="Queue of ml")).to_be_visible()
    rows = page.locator("table.queue tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("1000 (critical)")
    expect(rows.nth(1)).to_contain_text("-100 (low)")
    expect(page.get_by_role("meter", name="accel held of quota")).to_be_visible()
    expect(page.locator(".meter-text").first).to_contain_text("0 / 4")
    # fair share's memory and the work preemptions lost (docs/contention.md)
    expect(page.locator('[data-fair="usage"]')).to_have_text("0.0% of the fleet")
    expect(page.locator('[data-fair="half-life"]')).to_have_text("1h")
    expect(page.locator('[data-fair="lost"]')).to_have_text("none")
    page.screenshot(path=str(tmp_path / "console-queue.png"), full_page=True)
    context.close()
