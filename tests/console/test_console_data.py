"""The console's data (issue 33 item 6) in a real headless Chromium against a real `vglobal
server` with two simulated clusters: DataSources applied through the API are listed with the
clusters that hold them, a claim with the job it names, a share being staged with the agent's
progress, and a job's page shows what it reads, where each dataset is, its checkpoint and its
share's staging."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import yaml
from playwright.async_api import Browser, expect
from sqlalchemy import insert, select, update

from tests.conftest import ADMIN_TOKEN
from tests.console.test_console_browser import open_page, shot, state_of
from tests.data_documents import data_source, data_source_claim
from tests.factories import eventually, job_document
from tests.server_process import ServerProcess
from volcano_global.db.base import utcnow
from volcano_global.db.engine import create_engine
from volcano_global.db.models import Cluster, ClusterShare, CopyState, DataCopy, Placement
from volcano_global.jobspec.extensions import COMMUNICATION
from volcano_global.rpc.shares import SharePhase, StagingItem

PROGRESS = "staged 1 TiB of 4 TiB (25%)"


async def stage(server: ServerProcess, uid: str, source_cluster: str) -> None:
    """Leave the job's share as an agent copying 4 TiB into its cluster leaves it. The round
    that chooses to stage is issue 36's, not on this branch, and a simulated copy reports no
    bytes done: the test writes what the two would (as tests/core_agent's staging test gives
    the share its items), straight into the server's database."""
    item = StagingItem(
        data_source="corpus-v3",
        bytes=4 * 2**40,
        destination="/data/corpus-v3",
        source_cluster=source_cluster,
        gbps=100.0,
    )
    engine = create_engine(server.env["VGLOBAL_DATABASE_URL"])
    try:
        async with engine.begin() as connection:
            placement = (
                await connection.execute(
                    select(Placement.id).where(Placement.job_id == uuid.UUID(uid))
                )
            ).scalar_one()
            await connection.execute(
                update(ClusterShare)
                .where(ClusterShare.placement_id == placement)
                .values(phase=SharePhase.STAGING, staging=[item.to_payload()], message=PROGRESS)
            )
    finally:
        await engine.dispose()


async def apply(api: httpx.AsyncClient, *documents: Any) -> None:
    response = await api.post(
        "/api/v1/apply",
        content=yaml.safe_dump_all(documents),
        headers={"Content-Type": "application/yaml"},
    )
    assert response.status_code == 200, response.text


async def test_the_data_page_and_a_jobs_data(
    server: ServerProcess, federation: httpx.AsyncClient, browser: Browser
) -> None:
    api = federation
    await apply(
        api,
        data_source(clusters=("west",), size="4Ti"),
        data_source("eval-2027", clusters=("east", "west"), size="200Gi"),
        data_source_claim("reader-corpus", workload="reader"),
    )
    document = job_document("reader", replicas=1, runningEstimate="10h")
    document["metadata"]["annotations"] = {
        COMMUNICATION: "{datasets: [{name: eval-2027, size: 200Gi}], checkpoint: {size: 1Ti}}"
    }
    uid = (await api.post("/api/v1/jobs", json=document)).json()["uid"]

    async def running() -> bool:
        return await state_of(api, uid) == "Running"

    await eventually(running)
    (here,) = (await api.get(f"/api/v1/jobs/{uid}")).json()["clusters"]
    other = "west" if here == "east" else "east"
    await stage(server, uid, source_cluster=other)

    page, errors = await open_page(browser, "light")
    await page.goto(server.url + "/")
    await page.fill("[data-testid=token]", ADMIN_TOKEN)
    await page.click("button[type=submit]")

    # The Data page: each DataSource with its size and the clusters that hold it.
    await page.click("nav >> text=Data")
    await expect(page.get_by_test_id("locality-corpus-v3")).to_have_text("west")
    await expect(page.get_by_test_id("locality-eval-2027")).to_have_text("east, west")
    await expect(page.get_by_test_id("datasource-corpus-v3")).to_contain_text("4 TiB")
    await expect(page.get_by_test_id("datasource-eval-2027")).to_contain_text("200 GiB")
    await expect(page.get_by_test_id("claim-ml-reader-corpus")).to_contain_text("Job ml/reader")
    await expect(page.get_by_test_id("claim-ml-reader-corpus")).to_contain_text("corpus-v3")
    staging = page.get_by_test_id(f"staging-ml-reader-{here}")
    await expect(staging).to_contain_text(PROGRESS)
    await expect(staging).to_contain_text(f"corpus-v3 (4 TiB) from {other} at 100 Gbps")
    await shot(page, "data")

    # The job's page: what it reads and where, its checkpoint, its share's staging.
    await staging.locator("text=ml/reader").click()
    panel = page.get_by_test_id("job-data")
    corpus = panel.get_by_test_id("dataset-corpus-v3")
    await expect(corpus).to_contain_text("4 TiB")
    await expect(corpus).to_contain_text("west")
    await expect(corpus).to_contain_text("claim ml/reader-corpus")
    evaluation = panel.get_by_test_id("dataset-eval-2027")
    await expect(evaluation).to_contain_text("its declaration")
    # The cluster the job runs in is marked among those that hold the dataset.
    await expect(evaluation.locator(".here")).to_have_text(here)
    await expect(panel.get_by_test_id("job-checkpoint")).to_contain_text("1 TiB")
    await expect(panel.get_by_test_id("job-checkpoint")).to_contain_text("not written yet")
    share = panel.get_by_test_id(f"job-staging-{here}")
    await expect(share).to_contain_text("Staging")
    await expect(share).to_contain_text(PROGRESS)
    await shot(page, "job-data")
    assert errors == []
    await page.close()


COPYING = "copied 1 TiB of 4 TiB (25%)"


async def prefetch(server: ServerProcess, uid: str) -> None:
    """A copy made for the job while it waits, as the round writes it and its agent reports
    it (the round that prefetches is tests/global/scheduler/test_prefetch_rounds.py's), into
    the server's database."""
    engine = create_engine(server.env["VGLOBAL_DATABASE_URL"])
    try:
        async with engine.begin() as connection:
            ids = dict((await connection.execute(select(Cluster.name, Cluster.id))).all())
            item = StagingItem(  # about 6 min at 100 Gbps: copying while the test looks
                data_source="corpus-v3",
                bytes=4 * 2**40,
                destination="/data/corpus-v3/",
                source_cluster="west",
                gbps=100.0,
            )
            await connection.execute(
                insert(DataCopy).values(
                    id=uuid.uuid4(),
                    data_source="corpus-v3",
                    source_cluster_id=ids["west"],
                    destination_cluster_id=ids["east"],
                    bytes=4 * 2**40,
                    gbps=100.0,
                    job_id=uuid.UUID(uid),
                    purpose="prefetch",
                    namespace="ml",
                    item=item.to_payload(),
                    state=CopyState.COPYING,
                    staged_bytes=2**40,
                    message=COPYING,
                    reason="",
                    created_at=utcnow(),
                )
            )
    finally:
        await engine.dispose()


async def replica(server: ServerProcess) -> None:
    """A copy of corpus-v4 ahead of demand, for no job, from east into west, as the round
    writes one (tests/global/scheduler/test_replica_rounds.py's round), copying."""
    engine = create_engine(server.env["VGLOBAL_DATABASE_URL"])
    try:
        async with engine.begin() as connection:
            ids = dict((await connection.execute(select(Cluster.name, Cluster.id))).all())
            item = StagingItem(
                data_source="corpus-v4",
                bytes=2**40,
                destination="/data/corpus-v4/",
                source_cluster="east",
                gbps=50.0,
            )
            await connection.execute(
                insert(DataCopy).values(
                    id=uuid.uuid4(),
                    data_source="corpus-v4",
                    source_cluster_id=ids["east"],
                    destination_cluster_id=ids["west"],
                    bytes=2**40,
                    gbps=50.0,
                    job_id=None,
                    purpose="replica",
                    namespace="volcano-global-data",
                    item=item.to_payload(),
                    state=CopyState.COPYING,
                    staged_bytes=0,
                    message="",
                    reason="",
                    created_at=utcnow(),
                )
            )
    finally:
        await engine.dispose()


async def test_the_data_page_and_a_jobs_page_list_its_copies_while_it_waits(
    server: ServerProcess, federation: httpx.AsyncClient, browser: Browser
) -> None:
    api = federation
    await apply(api, data_source(clusters=("west",), size="4Ti"))
    await apply(api, data_source_claim("waiter-corpus", workload="waiter"))
    document = job_document("waiter", replicas=100, runningEstimate="10h")  # waits: no room
    uid = (await api.post("/api/v1/jobs", json=document)).json()["uid"]
    await prefetch(server, uid)
    await replica(server)

    page, errors = await open_page(browser, "light")
    await page.goto(server.url + "/")
    await page.fill("[data-testid=token]", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await page.click("nav >> text=Data")
    row = page.get_by_test_id("copies").get_by_test_id("copy-corpus-v3-east")
    await expect(row).to_contain_text("ml/waiter")
    await expect(row).to_contain_text("corpus-v3 (4 TiB) from west at 100 Gbps")
    await expect(row).to_contain_text("Copying")
    await expect(row).to_contain_text(COPYING)
    other = page.get_by_test_id("copies").get_by_test_id("copy-corpus-v4-west")
    await expect(other).to_contain_text("replica")  # for no job: its purpose
    await expect(other).to_contain_text("corpus-v4 (1 TiB) from east at 50 Gbps")
    await shot(page, "data-copies")

    await row.locator("text=ml/waiter").click()
    copy = page.get_by_test_id("job-copies").get_by_test_id("copy-corpus-v3-east")
    await expect(copy).to_contain_text("Copying")
    await expect(copy).to_contain_text(COPYING)
    assert errors == []
    await page.close()
