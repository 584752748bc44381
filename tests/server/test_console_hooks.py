"""The console's hooks page in a real browser (docs/hooks.md, docs/console.md): each
hook's deliveries with their attempts, and the redeliver button."""

from __future__ import annotations

import pytest
from browsers import CHROMIUM, require_chromium
from cryptography.fernet import Fernet
from receivers import Receiver
from waiting import eventually

from flux.client import FluxClient

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the dev extra)")
require_chromium()

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture
def receiver():
    made = Receiver(answers=[503])
    yield made
    made.close()


@pytest.mark.timeout(90)
def test_a_hooks_deliveries_show_with_their_attempts_and_one_is_redelivered(
    make_cluster, monkeypatch, receiver, tmp_path
):
    monkeypatch.setenv("FLUX_SECRETS_KEY", Fernet.generate_key().decode())
    cluster = make_cluster(server_args=("--hooks-allow-private", "--hooks-backoff", "0.2"))
    with FluxClient(cluster.server_url) as client:
        client.create_hook("pager", receiver.url, ["execution.failed"], secret="the-console-test-secret")
        delivery = client.test_hook("pager")
        eventually(lambda: client.hook_delivery("pager", delivery["id"])["state"] == "delivered", 30, "never delivered")
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            try:
                page = browser.new_page(base_url=cluster.server_url)
                page.goto("/ui/hooks")
                row = page.locator(f'section[data-hook="pager"] tr[data-delivery="{delivery["id"]}"]')
                sync_api.expect(row).to_contain_text("delivered")
                sync_api.expect(row.locator(".chip")).to_have_count(2)  # 503, then 200
                sync_api.expect(row.locator(".chip").first).to_contain_text("503")
                page.screenshot(
                    path=str(tmp_path / "console-hooks.png"), full_page=True
                )  # kept in the test's temp folder
                row.locator("button:has-text('Redeliver')").click()
                eventually(
                    lambda: len(client.hook_delivery("pager", delivery["id"])["attempts"]) == 3, 30, "never redelivered"
                )
                page.reload()
                sync_api.expect(page.locator(f'tr[data-delivery="{delivery["id"]}"] .chip')).to_have_count(3)
            finally:
                browser.close()
    assert {body["id"] for body in receiver.bodies()} == {delivery["id"]}
