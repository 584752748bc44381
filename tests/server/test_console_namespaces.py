"""The console's namespace switcher in a real browser against a real server: an admin
switches between two namespaces and every page shows only the current one's workflows
and executions (and a button acts in it); a viewer scoped to one namespace is offered
only it and opens in it; an execution of another namespace opened by URL is the API's
404, never a leak; the switcher works without JavaScript too."""

from __future__ import annotations

import re
import textwrap

import pytest
from test_console import browser, expect  # noqa: F401 - the fixture; skips with it: no Playwright or no Chromium

from flux.client import FluxClient
from flux.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.browser]

ADMIN = "console-namespaces-admin-token-0123456789"
FLOW = """
    from flux import task, workflow

    @task
    def hello():
        return "hi"

    @workflow
    async def {name}(ctx):
        return await hello()
"""


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    """A token-protected server with namespaces blue and green, each with its own workflow
    and one waiting execution of it (no worker: they stay SCHEDULED), and a viewer of green."""
    home = tmp_path_factory.mktemp("console-namespaces")
    with LocalCluster(home / "home", server_args=("--api-token", ADMIN)) as cluster:
        cluster.start_server()
        runs = {}
        with FluxClient(cluster.server_url, api_token=ADMIN) as admin:
            for namespace in ("blue", "green"):
                admin.create_namespace(namespace)
                source = home / f"{namespace}_flow.py"
                source.write_text(textwrap.dedent(FLOW.format(name=f"{namespace}_flow")))
                with FluxClient(cluster.server_url, api_token=ADMIN, namespace=namespace) as client:
                    client.register_file(source)
                    runs[namespace] = client.run(f"{namespace}_flow")["id"]
            viewer = admin.create_token("green-watcher", "viewer", ["green"])["token"]
        yield cluster, runs, viewer


@pytest.fixture
def page(browser, tenants):
    """A fresh browser (no cookies) per test."""
    context = browser.new_context(base_url=tenants[0].server_url)
    yield context.new_page()
    context.close()


def sign_in(page, token: str) -> None:
    page.goto("/ui/login")
    page.fill("#token", token)
    page.click("button:has-text('Sign in')")


def options(page) -> list[str]:
    return page.locator("#namespace-switch option").all_inner_texts()


def shows_only(page, namespace: str, runs: dict[str, str]) -> None:
    """The workflows and executions pages show this namespace's and not the other's."""
    other = "green" if namespace == "blue" else "blue"
    page.goto("/ui/workflows")
    expect(page.locator("main")).to_contain_text(f"{namespace}_flow")
    expect(page.locator("main")).not_to_contain_text(f"{other}_flow")
    page.goto("/ui/executions")
    expect(page.locator(f'tr[data-id="{runs[namespace]}"]')).to_have_count(1)
    expect(page.locator(f'tr[data-id="{runs[other]}"]')).to_have_count(0)
    expect(page.locator("#namespace-switch option:checked")).to_have_text(namespace)


def test_an_admin_switches_namespaces_and_each_page_shows_only_the_current_one(page, tenants):
    cluster, runs, _ = tenants
    sign_in(page, ADMIN)
    expect(page).to_have_url(re.compile(r"/ui/fleet$"))
    assert options(page) == ["blue", "default", "green"]  # an unscoped token sees them all
    expect(page.locator("#namespace-switch option:checked")).to_have_text("default")

    page.select_option("#namespace-switch", "blue")  # goes at once (with script)
    expect(page).to_have_url(re.compile(r"/ui/fleet\?namespace=blue$"))
    shows_only(page, "blue", runs)  # the choice outlives the page: a cookie
    page.goto(f"/ui/executions/{runs['blue']}")
    expect(page.locator("[data-live-state] .badge")).to_have_text("SCHEDULED")

    page.select_option("#namespace-switch", "green")  # from a detail page: to its list
    expect(page).to_have_url(re.compile(r"/ui/executions\?namespace=green$"))
    shows_only(page, "green", runs)
    missing = page.goto(f"/ui/executions/{runs['blue']}")  # another namespace's: not found
    assert missing.status == 404
    expect(page.locator("h1")).to_have_text("Error 404")

    shared = page.goto(f"/ui/executions/{runs['blue']}?namespace=blue")  # a link naming its namespace still opens
    assert shared.status == 200
    page.click("button:has-text('Cancel')")  # the button acts where its page showed
    expect(page.locator("[data-live-state] .badge")).to_have_text(re.compile("CANCELL"))
    with FluxClient(cluster.server_url, api_token=ADMIN, namespace="blue") as client:
        assert client.execution(runs["blue"])["state"] in ("CANCELLING", "CANCELLED")


def test_a_scoped_viewer_sees_only_its_namespace_and_opens_in_it(page, tenants):
    _, runs, viewer = tenants
    sign_in(page, viewer)
    expect(page).to_have_url(re.compile(r"/ui/executions$"))  # no fleet, and not default's 404
    assert options(page) == ["green"]
    expect(page.locator(f'tr[data-id="{runs["green"]}"]')).to_have_count(1)
    expect(page.locator("button:has-text('Cancel')")).to_have_count(0)  # a viewer's page has no buttons
    page.goto("/ui/workflows")
    expect(page.locator("main")).to_contain_text("green_flow")
    for url in (f"/ui/executions/{runs['blue']}", f"/ui/executions/{runs['blue']}?namespace=blue"):
        missing = page.goto(url)  # out of its scope reads as absent
        assert missing.status == 404
        expect(page.locator("main")).not_to_contain_text("blue_flow")


def test_the_switcher_works_without_javascript(browser, tenants):
    context = browser.new_context(base_url=tenants[0].server_url, java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in(page, ADMIN)
        page.select_option("#namespace-switch", "green")
        page.click("form[data-switcher] button:has-text('Switch')")
        expect(page).to_have_url(re.compile(r"/ui/fleet\?namespace=green$"))
        page.goto("/ui/workflows")
        expect(page.locator("main")).to_contain_text("green_flow")
    finally:
        context.close()
