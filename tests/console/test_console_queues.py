"""The console's queue page in a real headless Chromium: the queue tree with each queue's
deserved GPUs, allocation and share, and the priority classes."""

from __future__ import annotations

import httpx
from playwright.async_api import Browser, expect

from tests.conftest import ADMIN_TOKEN
from tests.console.test_console_browser import open_page, shot
from tests.factories import eventually, volcano_queue
from tests.server_process import ServerProcess


async def test_queue_page_shows_the_tree_and_its_fair_share(
    server: ServerProcess,
    federation: httpx.AsyncClient,
    browser: Browser,
) -> None:
    api = federation
    for document in (
        volcano_queue("eng", weight=3, capability={"nvidia.com/gpu": 80}),
        volcano_queue("prod", parent="eng"),
        volcano_queue("research"),
    ):
        assert (await api.post("/api/v1/queues", json=document)).status_code == 201
    await api.patch("/api/v1/queues/research", json={"state": "Closed"})
    # 128 GPUs in two clusters; prod asks for more than eng's cap of 80.
    for n in range(2):
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": f"big{n}", "namespace": "ml"},
            "spec": {
                "queue": "prod",
                "tasks": [
                    {
                        "name": "w",
                        "replicas": 20,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "t:1",
                                        "resources": {"limits": {"nvidia.com/gpu": "8"}},
                                    }
                                ]
                            }
                        },
                    }
                ],
            },
        }
        assert (await api.post("/api/v1/jobs", json=job)).status_code == 201
    await api.post(
        "/api/v1/priorityclasses",
        json={
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "urgent"},
            "value": 5000,
            "preemptionPolicy": "Never",
        },
    )

    async def ready() -> bool:
        items = (await api.get("/api/v1/clusters")).json()["items"]
        return [c["state"] for c in items] == ["Ready", "Ready"]

    await eventually(ready)
    page, errors = await open_page(browser, "light")
    await page.goto(server.url + "/")
    await page.fill("[data-testid=token]", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await page.click("nav >> text=Queues")
    table = page.get_by_test_id("queues")
    await expect(page.get_by_test_id("deserved-eng")).to_have_text("80")
    await expect(page.get_by_test_id("deserved-prod")).to_have_text("80")
    await expect(table.locator("tr[data-queue=research]")).to_contain_text("Closed")
    # prod is drawn below eng (tree order), indented.
    rows = await table.locator("tr[data-queue]").evaluate_all(
        "rows => rows.map(r => r.dataset.queue)"
    )
    assert rows.index("eng") + 1 == rows.index("prod")
    classes = page.get_by_test_id("priority-classes")
    await expect(classes).to_contain_text("system-node-critical")
    await expect(classes).to_contain_text("urgent")
    await shot(page, "queues-tree")
    assert errors == []
    await page.close()
