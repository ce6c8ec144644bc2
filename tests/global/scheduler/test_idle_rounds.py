"""The scheduling loop idles when nothing can change: a narrow elastic job with no room to
grow does not cost a round every period, until an inventory moves (a job ending frees GPUs)."""

from __future__ import annotations

import uuid

import httpx
from fastapi import FastAPI
from sqlalchemy import update

from tests.factories import create_cluster, inventory, job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job, JobState


async def test_a_narrow_elastic_job_without_room_idles_the_loop_until_the_inventory_moves(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    await create_cluster(api, "gpu-east")
    body = inventory("gpu-east", tors=1, nodes_per_tor=4)
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=body)).status_code == 200
    doc = job_document("elastic", replicas=8, minAvailable=2)
    uid = (await submit(api, doc)).json()["uid"]
    assert (await scheduler.run_once()).result.placed == [uid]  # 4 of its 8 pods
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).where(Job.id == uuid.UUID(uid)).values(state=JobState.RUNNING)
        )
    # Its pods run: the agent's inventory shows the four nodes used.
    full = inventory("gpu-east", tors=1, nodes_per_tor=4, used=8)
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=full)).status_code == 200
    # The first look finds no room to grow; after it, nothing to do until something moves.
    first = await scheduler.run_once()
    assert first is None or not first.result.resized
    assert await scheduler.run_once() is None
    assert await scheduler.run_once() is None
    # Four more nodes: the inventory moved, and the job grows into them.
    wider = inventory("gpu-east", tors=1, nodes_per_tor=8)
    for node in wider["nodes"][:4]:
        node["gpuUsed"] = 8
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=wider)).status_code == 200
    report = await scheduler.run_once()
    assert report is not None and report.result.resized == [uid]
