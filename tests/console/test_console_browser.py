"""The admin console in a real browser (Debian's Chromium, headless, driven by Playwright)
against a real `vglobal server` process with two simulated clusters streaming over gRPC.
Screenshots of every page go to `artifacts/console/` (not committed)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
from playwright.async_api import Browser, FloatRect, Locator, Page, Request, expect

from tests.conftest import ADMIN_TOKEN
from tests.factories import eventually, job_document, split_annotations
from tests.server_process import ServerProcess

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("VGLOBAL_ARTIFACTS", REPO / "artifacts")) / "console"
VALID = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: from-the-console, namespace: ml}
spec:
  runningEstimate: 10h
  tasks:
    - name: worker
      replicas: 1
      template:
        spec:
          containers:
            - name: c
              image: trainer:1
              resources: {limits: {nvidia.com/gpu: "8"}}
"""
INVALID = VALID.replace("runningEstimate: 10h", "runningEstimate: 10h\n  minAvaliable: 1")


async def open_page(browser: Browser, scheme: str) -> tuple[Page, list[str]]:
    """A page in light or dark mode, and the list its script errors and 5xx answers land in
    (4xx answers are expected: the test sends a wrong token and an invalid document)."""
    page = await browser.new_page(viewport={"width": 1400, "height": 1000}, color_scheme=scheme)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on(
        "response",
        lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 500 else None,
    )
    return page, problems


async def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def box_of(locator: Locator) -> FloatRect:
    """Where the element is: a redraw that replaces it while Playwright measures gives no box,
    so it is measured again (the redraw draws it in the same place)."""
    for _ in range(20):
        await expect(locator).to_be_visible()
        box = await locator.bounding_box()
        if box is not None:
            return box
    raise AssertionError(f"{locator} has no box")


async def redraw_keeps_a_selection(page: Page, uid: str) -> None:
    """The live redraw keeps the elements it draws again: the placement panel and the text
    selected in it are still there after two redraws (a redraw that replaced the panel would
    drop the selection with it)."""
    asked: list[str] = []

    def note(request: Request) -> None:
        if f"/jobs/{uid}/events" in request.url:
            asked.append(request.url)

    await page.evaluate(
        """() => {
            const panel = document.querySelector('[data-testid=placement]');
            panel.keptAcrossRedraws = true;
            const range = document.createRange();
            range.selectNodeContents(panel);
            getSelection().removeAllRanges();
            getSelection().addRange(range);
        }"""
    )
    page.on("request", note)
    for _ in range(50):
        if len(asked) >= 2:
            break
        await page.wait_for_timeout(200)
    assert len(asked) >= 2, "no redraw within 10 s"
    await page.wait_for_timeout(300)  # the second redraw's answers drawn
    page.remove_listener("request", note)
    kept = await page.evaluate(
        """() => [
            document.querySelector('[data-testid=placement]').keptAcrossRedraws === true,
            getSelection().toString().includes('50 Gbps on east'),
        ]"""
    )
    assert kept == [True, True], "the redraw replaced the panel or lost the selection"
    await page.evaluate("getSelection().removeAllRanges()")


async def a_second_fingers_release_leaves_the_press_held(page: Page, asked: list[str]) -> None:
    """A second pointer (a second finger) pressed and lifted while the first is down does not
    end the first's press: the page still draws nothing; the first pointer's cancel (the
    browser taking the gesture over) ends it."""
    await page.evaluate(
        "document.addEventListener('pointerdown', e => { window.pressedBy = e.pointerId; }, "
        "{once: true})"
    )
    box = await box_of(page.locator("h1"))
    await page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
    await page.mouse.down()
    for kind in ("pointerdown", "pointerup"):
        await page.evaluate(
            "kind => document.dispatchEvent(new PointerEvent(kind, "
            "{pointerId: 7, pointerType: 'touch', isPrimary: false, bubbles: true}))",
            kind,
        )
    asked.clear()
    await page.wait_for_timeout(2500)  # more than a redraw's period
    assert not asked, "a second finger's release ended the first finger's press"
    await page.evaluate(
        "document.dispatchEvent(new PointerEvent('pointercancel', "
        "{pointerId: window.pressedBy, isPrimary: true, bubbles: true}))"
    )
    await page.wait_for_timeout(2500)
    assert asked, "no redraw after the pressing pointer's cancel"
    await page.mouse.up()


async def state_of(api: httpx.AsyncClient, uid: str) -> str:
    return str((await api.get(f"/api/v1/jobs/{uid}")).json()["state"])


async def test_console_in_a_real_browser(
    server: ServerProcess, federation: httpx.AsyncClient, browser: Browser
) -> None:
    api = federation
    split = job_document("train", replicas=12, runningEstimate="10h")  # 96 GPUs > one cluster
    split["metadata"]["annotations"] = split_annotations(4, crossing_gbps=50)
    split_uid = (await api.post("/api/v1/jobs", json=split)).json()["uid"]
    small_uid = (
        await api.post(
            "/api/v1/jobs", json=job_document("small", replicas=1, runningEstimate="10h")
        )
    ).json()["uid"]

    async def running() -> bool:
        return {await state_of(api, split_uid), await state_of(api, small_uid)} == {"Running"}

    await eventually(running)

    for scheme in ("dark", "light"):  # dark: the overview only
        page, errors = await open_page(browser, scheme)
        await page.goto(server.url + "/")

        # Log in: a wrong token is refused with a message, the admin token gets in.
        await page.fill("[data-testid=token]", "vg_wrong")
        await page.click("button[type=submit]")
        await expect(page.get_by_test_id("login-error")).to_contain_text("refused")
        await page.fill("[data-testid=token]", ADMIN_TOKEN)
        await page.click("button[type=submit]")

        # Overview: both clusters Ready, the link with the split job's reservation.
        await expect(page.get_by_test_id("cluster-east")).to_contain_text("Ready")
        await expect(page.get_by_test_id("cluster-west")).to_contain_text("Ready")
        await expect(page.get_by_test_id("link-graph")).to_contain_text("50 / 400 Gbps")
        await expect(page.get_by_test_id("counter-running")).to_contain_text("2")
        await shot(page, f"overview-{scheme}")
        if scheme == "dark":
            assert errors == []
            await page.close()
            continue

        # The split job's placement across the two clusters.
        await page.click("nav >> text=Jobs")
        await expect(page.get_by_test_id("job-train")).to_contain_text("east, west")
        await shot(page, "jobs")
        await page.fill("input[name=text]", "smal")  # the text filter, applied as one types
        await expect(page.get_by_test_id("job-train")).to_have_count(0)
        await expect(page.get_by_test_id("job-small")).to_be_visible()
        await page.select_option("select[name=state]", "Pending")
        await expect(page.get_by_test_id("job-small")).to_have_count(0)
        await page.fill("input[name=text]", "")
        await page.select_option("select[name=state]", "")
        await page.click("text=ml/train")
        await expect(page.get_by_test_id("share-east")).to_contain_text("Running")
        await expect(page.get_by_test_id("share-west")).to_contain_text("Running")
        await expect(page.get_by_test_id("placement")).to_contain_text("50 Gbps on east")
        await shot(page, "job-split")
        await redraw_keeps_a_selection(page, split_uid)

        # A cluster page: the topology tree with free GPUs per domain.
        # A press held across the job page's live redraw (every 2 s) still clicks the link: a
        # redraw replacing the link between the press and the release would lose the click.
        link = page.get_by_test_id("share-east").get_by_role("link", name="east", exact=True)
        box = await box_of(link)
        await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        await page.mouse.down()
        await page.wait_for_timeout(2500)
        await page.mouse.up()
        await expect(page.get_by_test_id("topology")).to_contain_text("east-spine0000")
        await shot(page, "cluster")

        # A press that a context menu ends, with no release, leaves the page live.
        asked: list[str] = []
        page.on(
            "request",
            lambda r, asked=asked: (
                asked.append(r.url) if "/clusters/east/events" in r.url else None
            ),
        )
        box = await box_of(page.locator("h1"))
        await page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
        await page.mouse.down()
        await page.evaluate("document.dispatchEvent(new MouseEvent('contextmenu'))")
        await page.wait_for_timeout(2500)
        assert asked, "no redraw after a press that a context menu ended"
        await page.mouse.up()
        await a_second_fingers_release_leaves_the_press_held(page, asked)

        await page.click("nav >> text=Queues")
        await expect(page.get_by_test_id("queues")).to_contain_text("default")
        await shot(page, "queues")

        # Submit: an invalid document is refused naming the field, a valid one is accepted.
        await page.click("nav >> text=Submit")
        await page.fill("[data-testid=yaml]", INVALID)
        await page.click("button[type=submit]")
        await expect(page.get_by_test_id("submit-error")).to_contain_text("spec.minAvaliable")
        await shot(page, "submit-invalid")
        await page.fill("[data-testid=yaml]", VALID)
        await page.click("button[type=submit]")
        await expect(page.get_by_test_id("submitted-link")).to_contain_text("ml/from-the-console")
        await shot(page, "submit-valid")

        # Cancel a running job and watch the state change without reloading.
        await page.goto(f"{server.url}/#/jobs/{small_uid}")
        await expect(page.locator("h1 .badge")).to_have_text("Running")
        await page.click("[data-testid=cancel-job]")
        await expect(page.locator("h1 .badge")).to_have_text("Cancelled")
        assert await state_of(api, small_uid) == "Cancelled"
        # ...and a change made elsewhere (the API) shows up live too.
        await page.goto(f"{server.url}/#/jobs/{split_uid}")
        await expect(page.locator("h1 .badge")).to_have_text("Running")
        await api.post(f"/api/v1/jobs/{split_uid}/cancel")
        await expect(page.locator("h1 .badge")).to_have_text("Cancelled", timeout=10_000)
        await expect(page.get_by_test_id("placement")).to_contain_text("Released")  # where it ran
        await shot(page, "job-cancelled")
        assert errors == []
        await page.close()
