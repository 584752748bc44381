"""A gang in the web console (docs/gangs.md, issue 53.6), in a real browser against a real
server and two workers in rack a: a gang's page lists its members by rank, each a row of
its Gantt, each member's page links back to its gang, and a gang that fits no rack says
why, rack by rack. Screenshots go where test_console.py's go (FLUX_CONSOLE_SCREENSHOTS)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from browsers import CHROMIUM, require_chromium
from waiting import eventually

from flux.client import FluxClient
from flux.local import LocalCluster

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the dev extra)")
require_chromium()
expect = sync_api.expect

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.timeout(400)]

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
WAIT = 150.0  # a loaded 2-core machine is slow to start a gang's processes

WORKFLOWS = """
    from flux import Gang, workflow

    @workflow.with_options(gang=Gang(size=2, topology="rack"))
    async def duo(ctx):
        print(f"rank {ctx.gang.rank} of {ctx.gang.size}")
        return ctx.gang.rank

    @workflow.with_options(gang=Gang(size=3, topology="rack"))
    async def trio(ctx):
        return ctx.gang.rank
"""


@pytest.fixture(scope="module")
def rack(tmp_path_factory):
    home = tmp_path_factory.mktemp("console-gangs")
    cluster = LocalCluster(home / "home")
    try:
        cluster.start_server(timeout=90.0)
        for name in ("a1", "a2"):
            cluster.start_worker(name, labels={"rack": "a"}, max_concurrent_executions=1, timeout=90.0)
        source = home / "gang_flows.py"
        source.write_text(textwrap.dedent(WORKFLOWS))
        with FluxClient(cluster.server_url) as client:
            client.register_file(source)
            yield cluster, client
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def page(rack):
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=rack[0].server_url)
        tab = context.new_page()
        tab.set_default_timeout(20_000)
        yield tab
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("FLUX_CONSOLE_SCREENSHOTS") or tmp_path_factory.mktemp("console-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_a_gangs_page_lists_its_members_by_rank_each_a_gantt_row_and_a_member_links_back(page, rack, shots):
    _, client = rack
    page.goto("/ui/executions")  # live: the gang appears, its members (listed under it) do not
    expect(page.locator("[data-live-status]")).to_contain_text("Live")
    gang_id = client.run("duo", None)["id"]
    done = eventually(lambda: (e := client.execution(gang_id))["state"] in ("COMPLETED", "FAILED") and e, WAIT)
    assert done["state"] == "COMPLETED", done["error"]
    members = done["members"]
    expect(page.locator(f'tr[data-id="{gang_id}"] .badge')).to_have_text("COMPLETED")
    assert page.locator("table.executions tbody tr").count() == 1

    page.goto(f"/ui/executions/{gang_id}")
    expect(page.locator("[data-gang]")).to_contain_text("2 members in one rack")
    rows = page.locator("[data-members] table.members tbody tr")
    expect(rows).to_have_count(2)
    for rank, member in enumerate(members):
        row = page.locator(f'[data-members] tr[data-rank="{rank}"]')
        expect(row).to_contain_text(member["worker_name"])
        expect(row.locator(".badge")).to_have_text("COMPLETED")
    bars = page.locator("[data-members-gantt] li.gantt-row")
    expect(bars).to_have_count(2)
    expect(bars.nth(0)).to_contain_text("rank 0 on")
    expect(bars.nth(1)).to_have_attribute("data-outcome", "completed")
    expect(page.locator("[data-placement-summary]")).to_contain_text("gang placed in rack a")
    expect(page.locator("[data-gang-logs]")).to_contain_text(f"flux execution logs {gang_id[:12]} --rank N")
    page.screenshot(path=shots / "execution-gang.png", full_page=True)

    page.locator('[data-members] tr[data-rank="1"] a.mono').click()
    expect(page).to_have_url(f"{rack[0].server_url}/ui/executions/{members[1]['id']}")
    expect(page.locator("[data-gang-of]")).to_contain_text("rank 1")
    expect(page.locator("pre.logs")).to_contain_text("rank 1 of 2")
    page.locator("[data-gang-of] a").click()
    expect(page).to_have_url(f"{rack[0].server_url}/ui/executions/{gang_id}")


def test_a_gang_that_fits_no_rack_says_why_rack_by_rack(page, rack, shots):
    _, client = rack
    gang_id = client.run("trio", None)["id"]
    eventually(lambda: client.execution(gang_id)["placement_note"], WAIT, "no round looked at the gang")
    page.goto(f"/ui/executions/{gang_id}")
    summary = page.locator("[data-placement-summary]")
    expect(summary).to_contain_text("needs 3 workers in one rack: rack a has 2 that fit")
    expect(summary).to_contain_text("no rack could ever hold it, even idle (the most one holds is 2)")
    expect(page.locator("[data-gang-domains] li")).to_have_text(["rack a: 2 workers hold 2 now, 2 idle"])
    expect(page.locator("[data-members] tbody tr")).to_have_count(3)
    expect(page.locator("[data-members]")).to_contain_text("No member has started yet.")
    page.screenshot(path=shots / "execution-gang-waiting.png", full_page=True)
    client.cancel(gang_id)
