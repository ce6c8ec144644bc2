"""What a new user of the console met in the first hour (issue 37 item 12), in a real headless
Chromium: no nav on the login page, the queue tree indented under the CSP, Clusters and Links
pages, no Cancel on a finished job, absolute times beside relative ones."""

from __future__ import annotations

import re

import httpx
from playwright.async_api import Browser, ConsoleMessage, expect

from tests.conftest import ADMIN_TOKEN
from tests.console.test_console_browser import open_page, shot, state_of
from tests.factories import eventually, job_document, volcano_queue
from tests.server_process import ServerProcess

ABSOLUTE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")


async def test_the_console_a_new_user_meets(
    server: ServerProcess, federation: httpx.AsyncClient, browser: Browser
) -> None:
    api = federation
    for document in (volcano_queue("org-ml"), volcano_queue("ml-eval", parent="org-ml")):
        assert (await api.post("/api/v1/queues", json=document)).status_code == 201
    done = job_document("quick", replicas=1, runningEstimate="1s")
    done_uid = (await api.post("/api/v1/jobs", json=done)).json()["uid"]

    async def succeeded() -> bool:
        return await state_of(api, done_uid) == "Succeeded"

    await eventually(succeeded)

    page, errors = await open_page(browser, "light")
    blocked: list[str] = []  # CSP refusals are console errors, not page errors

    def on_console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            blocked.append(message.text)

    page.on("console", on_console)
    await page.goto(server.url + "/")

    # The login page: a form, no nav and no "Log out".
    await expect(page.get_by_test_id("token")).to_be_visible()
    await expect(page.locator("nav")).to_be_hidden()
    await expect(page.get_by_text("Log out")).to_be_hidden()
    await page.fill("[data-testid=token]", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await expect(page.get_by_text("Log out")).to_be_visible()

    # Clusters and Links have pages of their own in the nav.
    await page.click("nav >> text=Clusters")
    await expect(page.locator("h1")).to_have_text("Clusters")
    await expect(page.get_by_test_id("cluster-east")).to_contain_text("Ready")
    heartbeat = page.get_by_test_id("cluster-east").locator("time")
    assert ABSOLUTE.match(await heartbeat.get_attribute("title") or "")
    await page.click("nav >> text=Links")
    await expect(page.get_by_test_id("link-east-west")).to_contain_text("400 Gbps")
    await expect(page.get_by_test_id("link-graph")).to_be_visible()
    await shot(page, "links")

    # The queue tree: ml-eval indented under org-ml, with nothing refused by the CSP.
    await page.click("nav >> text=Queues")
    table = page.get_by_test_id("queues")
    await expect(table.locator("tr[data-queue=ml-eval]")).to_be_visible()

    async def indent(name: str) -> float:
        cell = table.locator(f"tr[data-queue={name}] td").first
        return float(
            (await cell.evaluate("td => getComputedStyle(td).paddingLeft")).removesuffix("px")
        )

    assert await indent("ml-eval") > await indent("org-ml")
    await shot(page, "queues-indented")

    # A finished job: no Cancel button, where and how long it ran, absolute times.
    await page.goto(f"{server.url}/#/jobs/{done_uid}")
    await expect(page.locator("h1 .badge")).to_have_text("Succeeded")
    await expect(page.get_by_test_id("job-times")).to_contain_text("ran ")
    await expect(page.get_by_test_id("cancel-job")).to_have_count(0)
    submitted = page.get_by_test_id("job-times").locator("time").first
    assert ABSOLUTE.match(await submitted.get_attribute("title") or "")
    await page.click("nav >> text=Jobs")
    await expect(page.get_by_test_id("job-quick")).to_contain_text("Succeeded")
    assert re.search(r"\b(east|west)\b", await page.get_by_test_id("job-quick").inner_text())
    assert errors == [] and blocked == []
    await page.close()
