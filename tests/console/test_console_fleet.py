"""The console at fleet scale, in a real browser (smaller than bench/console_bench.py): the
clusters and jobs a page at a time with their searches, the topology tree collapsed until a
domain is opened, and the History page over the samples the scheduling loop keeps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from tests.conftest import ADMIN_TOKEN
from tests.console.test_console_browser import open_page, shot
from tests.factories import create_queue, inventory, job_document, submit
from tests.server_process import ServerProcess
from volcano_global.db.base import utcnow
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import RoundSample

CLUSTERS = 25  # over one page of 20
JOBS = 60


@pytest.fixture
def quiet_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server without the scheduling loop: the jobs stay where the test put them."""
    process = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/fleet.db", tmp_path)
    process.start()
    yield process
    process.stop()


@pytest.fixture
async def fleet(quiet_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """25 clusters (REST inventories: one spine over 6 ToRs), 60 jobs over two queues."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=quiet_server.url, headers=headers, timeout=30) as api:
        for i in range(CLUSTERS):
            name = f"c{i:03d}"
            assert (await api.post("/api/v1/clusters", json={"name": name})).status_code == 201
            body = inventory(name, tors=6, nodes_per_tor=2)
            assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).is_success
        for queue in ("research", "prod"):
            await create_queue(api, queue)
        for i in range(JOBS):
            document = job_document(f"job-{i:03d}", queue=("research", "prod")[i % 2], replicas=1)
            assert (await submit(api, document)).status_code == 201
        yield api


async def logged_in(browser: Browser, server: ServerProcess, route: str) -> tuple[Page, list[str]]:
    page, errors = await open_page(browser, "light")
    await page.goto(server.url + "/")
    await page.fill("[data-testid=token]", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await expect(page.get_by_test_id("counter-pending")).to_be_visible()
    await page.goto(f"{server.url}/{route}")
    return page, errors


async def test_clusters_and_jobs_a_page_at_a_time(
    quiet_server: ServerProcess, fleet: httpx.AsyncClient, browser: Browser
) -> None:
    page, errors = await logged_in(browser, quiet_server, "#/")
    rows = page.locator("[data-testid=clusters] tr[data-testid^=cluster-]")
    await expect(rows).to_have_count(20)  # the overview: the first page only
    await page.click("[data-testid=all-clusters]")
    await expect(rows).to_have_count(20)
    await page.click("[data-testid=clusters-next]")
    await expect(page.locator(".pager")).to_contain_text("page 2")
    await expect(rows).to_have_count(CLUSTERS - 20)
    await expect(page.get_by_test_id("cluster-c024")).to_be_visible()
    await page.fill("input[name=text]", "C01")  # the search, by part of the name, any case
    await expect(rows).to_have_count(10)
    await expect(page.get_by_test_id("cluster-c010")).to_be_visible()
    await shot(page, "fleet-clusters-search")
    await page.select_option("select[name=state]", "Unknown")  # every one has an inventory
    await expect(rows).to_have_count(0)
    await page.select_option("select[name=state]", "Ready")
    await expect(rows).to_have_count(10)

    await page.click("nav >> text=Jobs")
    jobs = page.locator("[data-testid=jobs] tr[data-testid^=job-]")
    await expect(jobs).to_have_count(25)
    for number in (2, 3):  # each Next once the page before it is drawn
        await page.click("[data-testid=next-page]")
        await expect(page.locator(".pager")).to_contain_text(f"page {number}")
    await expect(jobs).to_have_count(JOBS - 50)
    await page.select_option("select[name=queue]", "prod")
    await page.fill("input[name=text]", "job-04")
    await expect(jobs).to_have_count(5)  # job-041, -043, ... -049: the odd ones are prod's
    await expect(page.get_by_test_id("job-job-041")).to_be_visible()
    await expect(page.get_by_test_id("job-job-040")).to_have_count(0)
    await shot(page, "fleet-jobs-search")
    assert errors == []
    await page.close()


async def test_the_topology_tree_opens_a_level_at_a_time(
    quiet_server: ServerProcess, fleet: httpx.AsyncClient, browser: Browser
) -> None:
    page, errors = await logged_in(browser, quiet_server, "#/clusters/c003")
    spine = page.get_by_test_id("domain-c003-spine")
    await expect(spine).to_contain_text("12 nodes, 6 below")
    await expect(page.get_by_test_id("domain-c003-tor0")).to_have_count(0)  # collapsed
    await page.click("[data-testid=toggle-c003-spine]")
    await expect(page.locator("[data-testid^=domain-c003-tor]")).to_have_count(6)
    await page.wait_for_timeout(2500)  # a live refresh keeps what is open
    await expect(page.locator("[data-testid^=domain-c003-tor]")).to_have_count(6)
    await shot(page, "fleet-topology-open")
    await page.click("[data-testid=toggle-c003-spine]")
    await expect(page.locator("[data-testid^=domain-c003-tor]")).to_have_count(0)
    assert errors == []
    await page.close()


async def test_the_history_page_draws_the_samples(
    quiet_server: ServerProcess, fleet: httpx.AsyncClient, browser: Browser, tmp_path: Path
) -> None:
    page, errors = await logged_in(browser, quiet_server, "#/history")
    await expect(page.get_by_test_id("history-empty")).to_be_visible()

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/fleet.db")
    async with transaction(create_session_factory(engine)) as session:
        session.add_all(
            RoundSample(
                taken_at=utcnow() - timedelta(minutes=minutes),
                gpus_total=400,
                gpus_allocated=100 + 5 * minutes,
                waiting_jobs=JOBS - minutes,
                waiting_gpus=8 * (JOBS - minutes),
                median_wait_seconds=60.0 * minutes,
                oldest_wait_seconds=120.0 * minutes,
            )
            for minutes in range(0, 50, 2)
        )
    await engine.dispose()

    await page.click("[data-testid=range-1h]")
    allocation = page.get_by_test_id("history-allocation")
    await expect(allocation.locator("path.line")).to_have_count(1)
    await expect(allocation.locator("circle.dot")).to_have_count(25)
    await expect(page.get_by_test_id("history-queue").locator("circle.dot").last).to_be_attached()
    waits = page.get_by_test_id("history-waits")
    await expect(waits.locator("path.line")).to_have_count(2)  # oldest and median
    # the newest bucket's figures, on hover
    await expect(allocation.locator("circle.dot title").last).to_contain_text("100 of 400 GPUs")
    await shot(page, "fleet-history")
    assert errors == []
    await page.close()
